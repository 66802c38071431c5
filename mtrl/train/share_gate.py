"""Learner-side share control: which waiting unrolls go into the next update.

A policy that sets target data shares (``balanced``, ``progress``) moves *whole actors*, and a
whole actor is a coarse unit: with a few actors over tasks whose step costs differ 10x, the
cheapest task's single actor may still deliver several times its share. The gate closes that
gap at the learner: an unroll of a task that is ahead of its target share by more than one
unroll waits, holding its slot, while the learner has enough other data for its next update.
An actor whose slots are all held blocks, which on shared cores hands its CPU to the tasks that
are behind. The gate never idles the learner: when the admitted unrolls cannot fill a batch,
held ones fill it in :func:`by_need` order (the trainer's queue does that), and the per-task
loss weights (:mod:`mtrl.train.loss_weights`) make up what the data mix still misses.

Shares are counted over a decaying window of recent updates, so an imbalance during warm-up
is not paid back for the rest of the run. An unroll held longer than ``max_hold_s`` goes in
regardless (a task that stops producing cannot stall the others), as does every unroll of a
task without a target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Each update multiplies the window's counts by this: a half-life of ~35 updates.
WINDOW_DECAY = 0.98


@dataclass(frozen=True)
class Waiting:
    """One unroll waiting for the learner: its task, samples and seconds it has waited."""

    task: int
    samples: int
    waited_s: float


def _overdue(w: Waiting, max_hold_s: float) -> bool:
    return w.waited_s >= max_hold_s


def admit(
    waiting: Sequence[Waiting],
    counts: np.ndarray,
    targets: np.ndarray,
    max_hold_s: float,
) -> list[int]:
    """Indices into ``waiting`` to use now, in the order they were chosen.

    ``counts[i]`` are task i's recent samples (the decayed window), ``targets[i]`` its target
    share; NaN marks a task the gate does not govern (no target, or no actors). Governed
    targets are renormalised to sum to 1. A governed unroll goes in when, with it, its task
    is ahead of ``target × total`` by at most its own size; the task furthest behind is served
    first, and every admission raises the total, so others may follow. Pure: no state.
    """
    counts = np.asarray(counts, dtype=float).copy()
    targets = np.asarray(targets, dtype=float)
    governed = ~np.isnan(targets)
    share = np.where(governed, np.nan_to_num(targets), 0.0)
    if share.sum() > 0:
        share = share / share.sum()
    chosen: list[int] = []
    left: list[int] = []
    for k, w in enumerate(waiting):
        if not governed[w.task] or _overdue(w, max_hold_s):
            chosen.append(k)
            counts[w.task] += w.samples
        else:
            left.append(k)
    while left:
        total = counts[governed].sum()
        behind = {k: share[waiting[k].task] * total - counts[waiting[k].task] for k in left}
        k = max(left, key=lambda j: (behind[j], -j))  # furthest behind; earliest on ties
        w = waiting[k]
        # With it the task may be ahead by at most its own size: share·(total+s) + s.
        if counts[w.task] + w.samples > share[w.task] * (total + w.samples) + w.samples:
            break
        chosen.append(k)
        counts[w.task] += w.samples
        left.remove(k)
    return chosen


def by_need(waiting: Sequence[Waiting], counts: np.ndarray, targets: np.ndarray) -> list[int]:
    """Indices into ``waiting``, the unrolls of the tasks furthest behind their target share
    first (ungoverned tasks count as furthest behind), arrival order on ties: the order in
    which held unrolls fill a batch the admitted ones cannot. Pure: no state."""
    counts = np.asarray(counts, dtype=float)
    targets = np.asarray(targets, dtype=float)
    governed = ~np.isnan(targets)
    share = np.where(governed, np.nan_to_num(targets), 0.0)
    if share.sum() > 0:
        share = share / share.sum()
    total = counts[governed].sum()

    def behind(k: int) -> float:
        task = waiting[k].task
        return share[task] * total - counts[task] if governed[task] else np.inf

    return sorted(range(len(waiting)), key=lambda k: (-behind(k), k))


class ShareGate:
    """The decaying window of delivered samples and the current targets; see :func:`admit`."""

    def __init__(self, num_tasks: int, max_hold_s: float, decay: float = WINDOW_DECAY) -> None:
        self.counts = np.zeros(num_tasks)
        self.targets = np.full(num_tasks, np.nan)
        self.max_hold_s = max_hold_s
        self.decay = decay

    @property
    def open(self) -> bool:
        """True when no task is governed (every unroll goes in at once)."""
        return bool(np.isnan(self.targets).all())

    def set_targets(self, targets: Sequence[float | None]) -> None:
        """Target share per task; ``None`` (or a task without actors) is not governed."""
        self.targets = np.array([np.nan if t is None else float(t) for t in targets])

    def admit(self, waiting: Sequence[Waiting]) -> list[int]:
        return admit(waiting, self.counts, self.targets, self.max_hold_s)

    def by_need(self, waiting: Sequence[Waiting]) -> list[int]:
        return by_need(waiting, self.counts, self.targets)

    def overdue(self, waiting: Sequence[Waiting], chosen: Sequence[int]) -> int:
        """How many of the ``chosen`` unrolls of governed tasks went in only for their wait."""
        return sum(
            _overdue(waiting[k], self.max_hold_s) and not np.isnan(self.targets[waiting[k].task])
            for k in chosen
        )

    def delivered(self, samples_per_task: Sequence[tuple[int, int]]) -> None:
        """One update consumed these ``(task, samples)``: decay the window, then add them."""
        self.counts *= self.decay
        for task, n in samples_per_task:
            self.counts[task] += n
