"""Run directories: ``{run_dir}/{name}__{seed}__{time}`` holding config, metrics, checkpoints."""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from mtrl.disk_faults import describe, disk_fault
from mtrl.errors import UserError


def create_run_dir(parent: Path, name: str, seed: int, config: dict[str, Any]) -> Path:
    """Make a fresh run directory and write the resolved config into it.

    A disk that refuses (full, read-only, no permission) is a :class:`UserError` naming the
    directory and ``tracking.run_dir``, and leaves nothing half-made behind.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(parent) / f"{name}__{seed}__{stamp}"
    suffix = 1
    while path.exists():
        suffix += 1
        path = Path(parent) / f"{name}__{seed}__{stamp}-{suffix}"
    try:
        path.mkdir(parents=True)
        (path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    except OSError as e:
        if (fault := disk_fault(e)) is None:
            raise
        with contextlib.suppress(OSError):
            shutil.rmtree(path)
        raise UserError(
            f"cannot write the run directory {path}: {describe(fault)} (tracking.run_dir: {parent})"
        ) from None
    return path
