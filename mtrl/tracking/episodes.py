"""``episodes.csv``: one row per finished episode, so learning curves have every point.

The metric records (``metrics.jsonl``) are snapshots every ``tracking.log_every_s``: a
one-minute run has six. This file keeps each episode the trainer counts, in the order it
counted them, with the columns of :data:`COLUMNS`:

* ``task``: the task's config name (``task/<id>/...`` in the metrics);
* ``env_steps``: the task's own env steps once the unroll in which the episode ended was
  counted (episodes that end in the same unroll share it; ``task/<id>/env_steps`` counts the
  same steps);
* ``return`` (unscaled, 7 significant digits) and ``length`` (env steps of the episode);
* ``wall_s``: the run's wall seconds when the trainer counted it, on the clock of
  ``charts/elapsed_s`` (a resumed run goes on from its checkpoint's; 3 decimals).

Cost is bounded: rows wait in memory and are written with each metric record, when
:data:`MAX_PENDING` wait, and at close: one write and flush per record, none per episode. A
crash loses at most the rows since the last record; what was written stays. A resumed run
appends under the existing header; a line torn by a crash is closed first, so it stays one
unreadable row that :func:`read_episodes` skips. Episodes of the stretch between the
checkpoint and the crash are lived again after a resume: the resumed run cuts them from the
file before it appends (:mod:`mtrl.tracking.resume_trim`), so env steps never go back in it;
in files resumed before that cut existed, :func:`read_episodes` drops the old ones, as
:func:`mtrl.tracking.report_data.load_run` does with metric records.
"""

from __future__ import annotations

import csv
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

FILENAME = "episodes.csv"
COLUMNS = ("task", "env_steps", "return", "length", "wall_s")
MAX_PENDING = 50_000
"""Rows kept in memory at most; more are written at once (a very long ``log_every_s``)."""


class EpisodeCsvSink:
    """Appends finished episodes to ``episodes.csv`` (see the module docstring).

    An :class:`~mtrl.tracking.sinks.EpisodeSink` that keeps the episodes, and a
    :class:`~mtrl.tracking.sinks.Sink` whose ``write`` only writes them out.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._pending: list[tuple[str, int, float, int, float]] = []
        new = not self.path.exists() or self.path.stat().st_size == 0
        torn = not new and not _ends_with_newline(self.path)
        self._f = self.path.open("a", newline="", encoding="utf-8")
        self._writer = csv.writer(self._f, lineterminator="\n")
        if torn:
            self._f.write("\n")
        if new:
            self._writer.writerow(COLUMNS)
        self._f.flush()

    def add_episodes(
        self,
        task: str,
        env_steps: int,
        returns: Sequence[float],
        lengths: Sequence[int],
        wall_s: float,
    ) -> None:
        """Keep the episodes of ``task`` that just finished; written with the next record."""
        steps, wall = int(env_steps), float(wall_s)
        self._pending.extend(
            (task, steps, float(r), int(n), wall) for r, n in zip(returns, lengths, strict=True)
        )
        if len(self._pending) >= MAX_PENDING:
            self.flush()

    def write(self, record: dict[str, Any]) -> None:
        """A metric record is due: write the pending episodes (the record itself is not kept)."""
        self.flush()

    def flush(self) -> None:
        """Write the pending rows and flush them to the operating system."""
        if not self._pending or self._f.closed:
            return
        rows, self._pending = self._pending, []  # a failing disk must not grow the buffer
        self._writer.writerows(
            (task, steps, f"{ret:.7g}", length, f"{wall:.3f}")
            for task, steps, ret, length, wall in rows
        )
        self._f.flush()

    def close(self) -> None:
        if self._f.closed:
            return
        try:
            self.flush()
        finally:  # closed even when the disk fails the last rows
            self._f.close()


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, 2)
        return f.read(1) == b"\n"


@dataclass(frozen=True)
class Episodes:
    """One task's finished episodes, in the order they were counted (arrays of equal length)."""

    env_steps: np.ndarray
    returns: np.ndarray
    lengths: np.ndarray
    wall_s: np.ndarray

    def __len__(self) -> int:
        return len(self.returns)


def read_episodes(path: Path) -> dict[str, Episodes]:
    """Each task's episodes from an ``episodes.csv``; {} when there is none.

    Rows that do not parse (a line torn by a crash) are skipped with one warning, as are
    non-finite returns (nothing to draw). When a task's env steps or wall seconds go back (a
    resumed run), its earlier rows at or past either are dropped: the continuation replaces
    them.
    """
    path = Path(path)
    if not path.is_file():
        return {}
    kept: dict[str, list[tuple[float, float, float, float]]] = {}
    bad = 0
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        where = {c: i for i, c in enumerate(header)}
        if any(c not in where for c in COLUMNS):
            warnings.warn(f"{path}: not an episodes file (header {header}); ignored", stacklevel=2)
            return {}
        task_i, cols = where["task"], [where[c] for c in COLUMNS[1:]]
        for row in reader:
            if not row:
                continue
            try:
                task = row[task_i]
                steps, ret, length, wall = (float(row[i]) for i in cols)
            except (IndexError, ValueError):
                bad += 1
                continue
            if not math.isfinite(ret):
                continue
            rows = kept.setdefault(task, [])
            if rows and (steps < rows[-1][0] or wall < rows[-1][3]):  # a resumed session
                while rows and (rows[-1][0] >= steps or rows[-1][3] >= wall):
                    rows.pop()
            rows.append((steps, ret, length, wall))
    if bad:
        warnings.warn(f"{path}: skipped {bad} unreadable row(s)", stacklevel=2)
    out = {}
    for task, rows in kept.items():
        a = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
        out[task] = Episodes(a[:, 0], a[:, 1], a[:, 2], a[:, 3])
    return out
