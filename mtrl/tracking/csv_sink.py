"""Metrics as a wide CSV (one row per record, one column per metric) that pandas reads as is.

New metrics appear during a run (a task's return after its first episode, PopArt statistics
after the first update). When a record brings a new key the file is rewritten once with the
wider header — old rows padded with empty cells — through a temp file and an atomic rename, so
the file on disk is always a complete, rectangular CSV, even after a crash. Records arrive
every few seconds and new keys mostly early, so the rewrites cost nothing that matters.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
from pathlib import Path
from typing import Any

from mtrl.tracking.sinks import jsonable

FIRST_COLUMNS = ("charts/env_steps", "charts/elapsed_s")


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, default=jsonable)
    return jsonable(value)


def _at(row: list[str], index: int | None) -> str:
    return row[index] if index is not None and index < len(row) else ""


class CsvSink:
    """Writes ``metrics.csv``; the header grows as new keys appear (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.columns: list[str] = self._read_header()
        self._f = self.path.open("a", newline="", encoding="utf-8")
        self._writer = csv.writer(self._f)
        self._pending_header = not self.columns

    def _read_header(self) -> list[str]:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return []
        with self.path.open(newline="", encoding="utf-8") as f:
            return next(csv.reader(f), [])

    def write(self, record: dict[str, Any]) -> None:
        if not record:
            return
        known = set(self.columns)
        new = [k for k in record if k not in known]
        if new:
            self._grow(new)
        self._writer.writerow([_cell(record.get(c)) for c in self.columns])
        self._f.flush()

    def _grow(self, new: list[str]) -> None:
        """Widen the header to include ``new``: rewrite the file with padded old rows."""
        first = [c for c in FIRST_COLUMNS if c in new and c not in self.columns]
        columns = first + self.columns + [c for c in new if c not in first]
        self._f.close()
        rows: list[list[str]] = []
        if not self._pending_header:
            with self.path.open(newline="", encoding="utf-8") as f:
                reader = csv.reader(f)
                old = next(reader, [])
                where = {c: i for i, c in enumerate(old)}
                for row in reader:
                    rows.append([_at(row, where.get(c)) for c in columns])
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        try:
            with tmp.open("w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                w.writerow(columns)
                w.writerows(rows)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:  # a full disk: the old file stays whole, no temp file is left
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise
        self.columns = columns
        self._pending_header = False
        self._f = self.path.open("a", newline="", encoding="utf-8")
        self._writer = csv.writer(self._f)

    def close(self) -> None:
        self._f.close()
