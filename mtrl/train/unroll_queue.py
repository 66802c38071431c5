"""Unrolls waiting for the learner, which of them the next update takes, and how much each
task's loss weighs.

Every unroll an actor hands over waits here until an update uses it; its slot stays the
learner's until then. Without share targets every waiting unroll goes into the next update.
With them (``balanced``, ``progress``; see :mod:`mtrl.train.share_gate`) the share gate
picks, and unrolls of tasks ahead of their share may wait, at most ``max_hold_s`` — only where
the loss weights cannot meet the targets (weighting off, or a weight at its cap), and only
while the learner has other work: the gate is work-conserving, so when the admitted unrolls
cannot fill a batch the held ones fill it (least ahead first) rather than leave the learner
and the held actors' cores idle.

What the gate cannot fix by choosing, the loss weights do
(:mod:`mtrl.train.loss_weights`): each task's loss is scaled by target share / recent data
share, so the weights (or the adaptive policy's shares) are met in every policy, gate or not.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from mtrl.actors.server import ReadyUnroll
from mtrl.learner.batch import TaskBatch
from mtrl.train.loss_weights import capped_tasks, effective_shares, loss_weights
from mtrl.train.share_gate import WINDOW_DECAY, ShareGate, Waiting

#: Updates before a capped loss weight is reported: the window must hold more than warm-up.
CAPPED_AFTER_UPDATES = 100


class UnrollQueue:
    """The waiting unrolls, in arrival order, the share gate that admits them and the
    per-task loss weights of each update."""

    def __init__(
        self,
        num_tasks: int,
        max_hold_s: float,
        *,
        weights: Sequence[float] | None = None,
        hold: bool = True,
        max_loss_weight: float | None = None,
    ) -> None:
        """``weights``: the tasks' configured weights (target shares where no policy sets
        one); ``hold``: whether the gate may hold unrolls (``scheduler.share_gate``);
        ``max_loss_weight``: cap of the loss weights, None for no loss weighting."""
        self.gate = ShareGate(num_tasks, max_hold_s)
        self.hold = hold
        self.max_loss_weight = max_loss_weight
        w = np.ones(num_tasks) if weights is None else np.asarray(weights, dtype=float)
        self.weight_shares = w / w.sum()
        self.loss_targets = self.weight_shares.copy()
        """Target share per task for the loss weights: the policy's share, else the weight's."""
        self.last_weights = np.ones(num_tasks)
        self.last_counts = np.zeros(num_tasks)
        self.updates = 0
        self._waiting: list[tuple[ReadyUnroll, float]] = []  # (unroll, arrival time)
        self.overdue = 0
        """Governed unrolls let in only because they waited ``max_hold_s``: a task the gate
        waits for is not producing (too few actors, hung, restarting)."""
        self.filled = 0
        """Held unrolls let in because the admitted ones could not fill a batch (the gate does
        not idle the learner): the actors cannot produce the target mix, the loss weights
        make up the difference."""

    def __len__(self) -> int:
        return len(self._waiting)

    def columns(self) -> dict[int, int]:
        """Env columns waiting, per task."""
        out: dict[int, int] = {}
        for ru, _ in self._waiting:
            out[ru.task] = out.get(ru.task, 0) + ru.buffer.num_envs
        return out

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
        the queue); when the admitted ones fall short, held ones fill the batch, least ahead
        of its share first; None (all keep waiting) when even all of them fall short."""
        columns = [ru.buffer.num_envs for ru, _ in self._waiting]
        if sum(columns) < min_columns:
            return None
        chosen, late = list(range(len(self._waiting))), 0
        if not self.gate.open and self._weighting_falls_short():
            now = time.monotonic()
            waiting = [
                Waiting(ru.task, ru.buffer.num_envs * ru.buffer.length, now - t)
                for ru, t in self._waiting
            ]
            chosen = self.gate.admit(waiting)
            late = self.gate.overdue(waiting, chosen)
            held = [k for k in self.gate.by_need(waiting) if k not in set(chosen)]
            while sum(columns[k] for k in chosen) < min_columns and held:
                chosen.append(held.pop(0))
                self.filled += 1
        self.overdue += late
        taken = set(chosen)
        out = [self._waiting[k][0] for k in chosen]
        self._waiting = [w for k, w in enumerate(self._waiting) if k not in taken]
        return out

    def _weighting_falls_short(self) -> bool:
        """Whether the gate should hold at all: without loss weights, or when a weight is at
        its cap (only more data helps that task). Otherwise the weights already meet the
        targets, and holding would only block the cheap tasks' actors for nothing."""
        if self.max_loss_weight is None:
            return True
        return bool(capped_tasks(self.last_counts, self.loss_targets, self.max_loss_weight))

    def drain(self) -> list[ReadyUnroll]:
        """Every waiting unroll (at the end of a run, to give the slots back)."""
        out = [ru for ru, _ in self._waiting]
        self._waiting = []
        return out

    def weigh(self, batches: Sequence[TaskBatch]) -> None:
        """Set each batch's ``loss_weight`` from the recent window with this update's data in
        it (nothing when loss weighting is off)."""
        if self.max_loss_weight is None:
            return
        counts = self.gate.counts * WINDOW_DECAY
        for b in batches:
            counts[b.task] += b.num_steps
        self.last_counts = counts
        self.last_weights = loss_weights(counts, self.loss_targets, self.max_loss_weight)
        for b in batches:
            b.loss_weight = float(self.last_weights[b.task])

    def capped(self) -> list[int]:
        """Tasks whose loss weight hit the cap in the last update (too little data to meet
        their target share by weighting)."""
        if self.max_loss_weight is None or self.updates < CAPPED_AFTER_UPDATES:
            return []
        return capped_tasks(self.last_counts, self.loss_targets, self.max_loss_weight)

    def capped_message(self, task: int, name: str) -> str:
        """Why task ``task`` (:meth:`capped`) misses its target share, and what to change."""
        counts, cap = self.last_counts, self.max_loss_weight
        targets = self.loss_targets / self.loss_targets.sum()
        effective = effective_shares(counts, self.last_weights)
        return (
            f"task {name!r} gets {counts[task] / counts.sum():.1%} of the learner's data against "
            f"a target share of {targets[task]:.1%}; its loss weight is capped at {cap:g} "
            f"(scheduler.max_loss_weight), so it has {effective[task]:.1%} of the learning "
            f"signal. Give it more data: more actors (scheduler.num_actors, with policy "
            f"balanced) or more envs (tasks[{task}].num_envs), or lower its weight"
        )

    def delivered(self, samples_per_task: Sequence[tuple[int, int]]) -> None:
        """An update consumed these ``(task, env steps)`` (Anakin batches included)."""
        self.gate.delivered(samples_per_task)
        self.updates += 1

    def set_targets(self, shares: Sequence[float | None]) -> None:
        """Target data share per task; None leaves a task ungoverned by the gate (its loss
        weight then aims at its weight share)."""
        if self.hold:
            self.gate.set_targets(shares)
        self.loss_targets = np.array(
            [self.weight_shares[i] if s is None else float(s) for i, s in enumerate(shares)]
        )

    def share_metrics(self, names: Sequence[str]) -> dict[str, float]:
        """Each task's target share, its share of the recent data and — with loss weighting —
        its loss weight and effective share of the learning signal; the gate's counters."""
        gate = self.gate
        out: dict[str, float] = {}
        if not gate.open:
            out["scheduler/overdue_unrolls"] = float(self.overdue)
            out["scheduler/filled_unrolls"] = float(self.filled)
        total = gate.counts.sum()
        targets = self.loss_targets / self.loss_targets.sum()
        effective = effective_shares(gate.counts, self.last_weights)
        for i, name in enumerate(names):
            out[f"scheduler/{name}/target_share"] = float(targets[i])
            if total > 0:
                out[f"scheduler/{name}/recent_share"] = float(gate.counts[i] / total)
                if self.max_loss_weight is not None:
                    out[f"scheduler/{name}/loss_weight"] = float(self.last_weights[i])
                    out[f"scheduler/{name}/effective_share"] = float(effective[i])
        return out
