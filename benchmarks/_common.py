"""Shared helpers of the benchmark scripts: machine facts and writing results."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import torch

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "load_avg_1min_at_start": load,
    }


def write_result(name: str, payload: dict[str, Any], directory: Path | None = None) -> Path:
    """Write ``<directory>/<name>.json`` (default ``docs/results``) and return its path."""
    directory = RESULTS if directory is None else Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path
