"""Where a setting sits in a config file, for problems found after the config loaded.

Schema errors get their ``file:line`` from :mod:`mtrl.config.loading` while validating; checks
that run later on a loaded config (``mtrl validate --check-envs`` building each task's env)
use :func:`config_location` to point at the same kind of ``file:line``.
"""

from __future__ import annotations

from pathlib import Path

from mtrl.config.loading import Loc, _line_of
from mtrl.config.safe_yaml import compose_config, read_config_text
from mtrl.errors import ConfigError

__all__ = ["config_location"]


def config_location(path: str | Path, loc: Loc) -> str:
    """``"<path>:<line>"`` of the YAML node at ``loc`` (e.g. ``("tasks", 2, "env")``), or of
    its deepest existing parent; just ``"<path>"`` if the file cannot be read or parsed (within
    the limits of :mod:`mtrl.config.safe_yaml`: it may have changed since it loaded)."""
    try:
        root, _ = compose_config(read_config_text(Path(path)), str(path))
    except ConfigError:
        return str(path)
    line = _line_of(root, loc)
    return f"{path}:{line}" if line else str(path)
