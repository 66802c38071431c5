"""Metric sinks: JSON lines on disk and a console progress line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO


class JsonlSink:
    """Appends one JSON object per record to ``metrics.jsonl``; flushed each write."""

    def __init__(self, path: Path) -> None:
        self._f = Path(path).open("a", encoding="utf-8")  # noqa: SIM115 - held open for the run

    def write(self, record: dict[str, Any]) -> None:
        self._f.write(json.dumps(record, allow_nan=True) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


class ConsoleSink:
    """One readable line per record: steps, steps/s and each task's recent mean return."""

    def __init__(self, task_names: list[str], stream: TextIO | None = None) -> None:
        self.task_names = task_names
        self.stream = stream or sys.stdout

    def write(self, record: dict[str, Any]) -> None:
        parts = [
            f"steps {record['charts/env_steps']:>9,}",
            f"sps {record.get('charts/sps', 0):>7,.0f}",
        ]
        for name in self.task_names:
            ret = record.get(f"task/{name}/return")
            if ret is not None:
                parts.append(f"{name.split('/')[-1]} {ret:8.1f}")
        print(" | ".join(parts), file=self.stream, flush=True)

    def close(self) -> None:
        pass
