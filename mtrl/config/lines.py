"""Where a setting sits in a config file, for problems found after the config loaded.

Schema errors get their ``file:line`` from :mod:`mtrl.config.loading` while validating; checks
that run later on a loaded config (``mtrl validate --check-envs`` building each task's env)
use :func:`config_location` to point at the same kind of ``file:line``.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from mtrl.config.loading import Loc, _line_of

__all__ = ["config_location"]


def config_location(path: str | Path, loc: Loc) -> str:
    """``"<path>:<line>"`` of the YAML node at ``loc`` (e.g. ``("tasks", 2, "env")``), or of
    its deepest existing parent; just ``"<path>"`` if the file cannot be read or parsed."""
    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return str(path)
    line = _line_of(root, loc)
    return f"{path}:{line}" if line else str(path)
