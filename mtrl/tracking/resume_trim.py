"""Cut a run's metric files back to the checkpoint it resumes from.

A run killed past its newest checkpoint (``kill -9``, a lost node) has written episodes and
records that its continuation lives again: left in place, ``episodes.csv`` would go back in
env steps where the continuation starts and every reader would have to sort the two stretches
apart. Before a resumed run opens its sinks, :func:`trim_to_checkpoint` drops from
``episodes.csv`` the rows past each task's env steps in the checkpoint, and from
``metrics.jsonl`` and ``metrics.csv`` the records past the checkpoint's run env steps, along
with lines torn by the kill. A file is rewritten (a temp file renamed over it, so a crash
meanwhile leaves the old file) only when something goes; a disk that refuses the rewrite is
one warning, and the file stays as it was (the readers drop such rows as before).
"""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from mtrl.disk_faults import describe, disk_fault
from mtrl.tracking.episodes import COLUMNS as EPISODE_COLUMNS
from mtrl.tracking.episodes import FILENAME as EPISODES

log = logging.getLogger("mtrl.tracking")

STEPS = "charts/env_steps"


def trim_to_checkpoint(run_dir: Path, run_steps: int, task_steps: Mapping[str, int]) -> None:
    """Drop what ``run_dir``'s metric files hold past a checkpoint of ``run_steps`` env steps
    whose tasks were at ``task_steps`` (task name → its own env steps)."""
    run_dir = Path(run_dir)
    _trim(run_dir / EPISODES, _episode_kept(task_steps), header=True)
    _trim(run_dir / "metrics.jsonl", _record_kept(run_steps), header=False)
    metrics_csv = run_dir / "metrics.csv"
    if metrics_csv.is_file():
        with metrics_csv.open(newline="", encoding="utf-8") as f:
            columns = next(csv.reader(f), [])
        if STEPS in columns:
            _trim(metrics_csv, _row_kept(columns.index(STEPS), run_steps), header=True)


def _episode_kept(task_steps: Mapping[str, int]) -> Callable[[str], bool]:
    def kept(line: str) -> bool:
        row = next(csv.reader([line]), [])
        if len(row) != len(EPISODE_COLUMNS):
            return False  # torn by a kill
        try:
            steps = int(row[1])
        except ValueError:
            return False
        return steps <= task_steps.get(row[0], steps)  # a task not in the checkpoint: kept

    return kept


def _record_kept(run_steps: int) -> Callable[[str], bool]:
    def kept(line: str) -> bool:
        try:
            record = json.loads(line)
        except ValueError:
            return False  # torn by a kill
        return not isinstance(record, dict) or record.get(STEPS, 0) <= run_steps

    return kept


def _row_kept(index: int, run_steps: int) -> Callable[[str], bool]:
    def kept(line: str) -> bool:
        try:
            return float(next(csv.reader([line]))[index]) <= run_steps
        except (ValueError, IndexError, StopIteration):
            return True  # an empty cell: not a record this can place

    return kept


def _trim(path: Path, kept: Callable[[str], bool], *, header: bool) -> None:
    """Rewrite ``path`` without the lines ``kept`` refuses, nor a last line cut short (no
    line end: torn by a kill); the header always stays."""
    if not path.is_file():
        return

    def keep(line: str) -> bool:
        return line.endswith(("\n", "\r")) and kept(line)

    with path.open(encoding="utf-8", newline="") as f:
        lines = iter(f)
        if header:
            next(lines, None)
        if all(keep(x) for x in lines if x.strip()):
            return
    tmp = path.with_name(f".{path.name}.trim")
    try:
        with (
            path.open(encoding="utf-8", newline="") as src,
            tmp.open("w", encoding="utf-8", newline="") as dst,
        ):
            for i, line in enumerate(src):
                if (header and i == 0) or (line.strip() and keep(line)):
                    dst.write(line)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if (fault := disk_fault(e)) is None:
            raise
        log.warning("tracking: %s not cut back to the checkpoint: %s", path, describe(fault))
