"""Unrolls waiting for the learner, and which of them the next update takes.

Every unroll an actor hands over waits here until an update uses it; its slot stays the
learner's until then. Without share targets every waiting unroll goes into the next update.
With them (``balanced``, ``progress``; see :mod:`mtrl.scheduler.admission`) the share gate
picks, and unrolls of tasks ahead of their share keep waiting, at most ``max_hold_s``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from mtrl.actors.server import ReadyUnroll
from mtrl.scheduler.admission import ShareGate, Waiting


class UnrollQueue:
    """The waiting unrolls, in arrival order, with the share gate that admits them."""

    def __init__(self, num_tasks: int, max_hold_s: float) -> None:
        self.gate = ShareGate(num_tasks, max_hold_s)
        self._waiting: list[tuple[ReadyUnroll, float]] = []  # (unroll, arrival time)
        self.overdue = 0
        """Governed unrolls let in only because they waited ``max_hold_s``: a task the gate
        waits for is not producing (too few actors, hung, restarting)."""

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, ru: ReadyUnroll) -> None:
        self._waiting.append((ru, time.monotonic()))

    def wait_s(self) -> float:
        """How long the trainer may block for more unrolls: until the oldest held unroll is
        due at the gate, at most 1 s."""
        if not self._waiting or self.gate.open:
            return 1.0
        oldest = min(t for _, t in self._waiting)
        return float(np.clip(oldest + self.gate.max_hold_s - time.monotonic(), 0.01, 1.0))

    def take(self, min_columns: int) -> list[ReadyUnroll] | None:
        """The admitted unrolls if they hold at least ``min_columns`` env columns (they leave
        the queue), else None (all keep waiting)."""
        if self.gate.open:
            chosen = list(range(len(self._waiting)))
            late = 0
        else:
            now = time.monotonic()
            waiting = [
                Waiting(ru.task, ru.buffer.num_envs * ru.buffer.length, now - t)
                for ru, t in self._waiting
            ]
            chosen = self.gate.admit(waiting)
            late = self.gate.overdue(waiting, chosen)
        if sum(self._waiting[k][0].buffer.num_envs for k in chosen) < min_columns:
            return None
        self.overdue += late
        taken = set(chosen)
        out = [self._waiting[k][0] for k in chosen]
        self._waiting = [w for k, w in enumerate(self._waiting) if k not in taken]
        return out

    def drain(self) -> list[ReadyUnroll]:
        """Every waiting unroll (at the end of a run, to give the slots back)."""
        out = [ru for ru, _ in self._waiting]
        self._waiting = []
        return out

    def delivered(self, samples_per_task: Sequence[tuple[int, int]]) -> None:
        """An update consumed these ``(task, samples)`` (Anakin batches included)."""
        self.gate.delivered(samples_per_task)

    def set_targets(self, shares: Sequence[float | None]) -> None:
        """Target data share per task; None leaves a task ungoverned."""
        self.gate.set_targets(shares)

    def share_metrics(self, names: Sequence[str]) -> dict[str, float]:
        """Each governed task's target share and its share of the gate's recent window."""
        gate = self.gate
        if gate.open:
            return {}
        governed = ~np.isnan(gate.targets)
        total = gate.counts[governed].sum()
        target_sum = gate.targets[governed].sum()
        out = {"scheduler/overdue_unrolls": float(self.overdue)}
        for i in np.flatnonzero(governed):
            out[f"scheduler/{names[i]}/target_share"] = float(gate.targets[i] / target_sum)
            if total > 0:
                out[f"scheduler/{names[i]}/recent_share"] = float(gate.counts[i] / total)
        return out
