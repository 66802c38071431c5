"""Run directories: ``{run_dir}/{name}__{seed}__{time}`` holding config, metrics, checkpoints."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml


def create_run_dir(parent: Path, name: str, seed: int, config: dict[str, Any]) -> Path:
    """Make a fresh run directory and write the resolved config into it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(parent) / f"{name}__{seed}__{stamp}"
    suffix = 1
    while path.exists():
        suffix += 1
        path = Path(parent) / f"{name}__{seed}__{stamp}-{suffix}"
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return path
