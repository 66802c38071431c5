"""Built-in allocation policies: pure functions ``(records, budget) -> Allocation``.

* :func:`fixed` — actors proportional to task weights (IMPALA's equal split when weights are
  equal). Ignores every measurement; the baseline.
* :func:`balanced` — each task's share of *learner samples* matches its weight whatever its step
  cost: actors ∝ weight / (steps/s per actor), so slow or jittery tasks get more actors.
* :func:`progress` — data shares tilted towards tasks that lag furthest behind their target or
  whose score moves fastest (up, or down when forgetting), as in active sampling (Sharma et al.
  2018, "Learning to multi-task by active sampling") and learning-progress curricula (Graves
  et al. 2017); every task keeps ``budget.floor_share`` of its weight share so none is
  forgotten, and shares become actors through throughput exactly as in ``balanced``.

Adaptive policies also return each task's target data share (``Allocation.shares``: the rule's
share for warm tasks, the weight share for the others), which the learner's share gate
enforces below the resolution of whole actors (:mod:`mtrl.train.share_gate`).

Common rules: quarantined tasks get 0; tasks not yet warm get their fixed split of the budget
(the warm ones share the rest); every other task gets at least ``budget.min_per_task``; the
counts sum to ``budget.slots`` exactly, rounded by largest remainder (Hamilton's method).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mtrl.scheduler.records import Allocation, Budget, TaskRecord

#: ``rule(warm_records, their_weight_shares, budget) -> (data_shares, notes)``; the data shares
#: sum to the weight shares' sum, the notes explain each task's share in its reason line.
_ShareRule = Callable[[Sequence[TaskRecord], np.ndarray, Budget], tuple[np.ndarray, list[str]]]


def apportion(quota: Sequence[float] | np.ndarray, slots: int, floor: int = 0) -> np.ndarray:
    """Integers summing to ``slots``, each ``>= floor``, as close as possible to ``quota``.

    ``quota`` (non-negative, any scale) is first scaled to ``slots``; tasks under the floor are
    raised to it and the rest re-scaled (water-filling); then largest remainder rounds. An
    infeasible floor (``floor * n > slots``) is lowered to ``slots // n``. Ties go to the
    earlier task, so the result is deterministic.
    """
    q = np.clip(np.asarray(quota, dtype=float), 0.0, None)
    n = len(q)
    if n == 0 or slots <= 0:
        return np.zeros(n, dtype=np.int64)
    if not np.isfinite(q).all():
        raise ValueError(f"quota must be finite, got {quota}")
    lo = min(floor, slots // n)
    if q.sum() <= 0:
        q = np.ones(n)
    raised = np.zeros(n, dtype=bool)
    while True:
        share = np.where(raised, 0.0, q)
        if share.sum() <= 0:
            share = np.where(raised, 0.0, 1.0)
        a = np.where(raised, float(lo), (slots - lo * raised.sum()) * share / share.sum())
        low = ~raised & (a < lo)
        if not low.any():
            break
        raised |= low
    base = np.maximum(np.floor(a + 1e-9), lo).astype(np.int64)
    left = slots - int(base.sum())
    frac = a - base
    if left > 0:
        order = np.lexsort((np.arange(n), -frac))
        base[order[:left]] += 1
    elif left < 0:  # float round-off only: take back from the smallest remainders above floor
        for i in np.lexsort((np.arange(n), frac)):
            if left == 0:
                break
            if base[i] > lo:
                base[i] -= 1
                left += 1
    return base


def _allocate(
    records: Sequence[TaskRecord], budget: Budget, policy: str, rule: _ShareRule | None
) -> Allocation:
    """Shared skeleton: quarantine, cold tasks at the fixed split, warm ones by ``rule``."""
    actors = {r.name: 0 for r in records}
    reasons = {r.name: "quarantined after repeated failures" for r in records if r.quarantined}
    active = [r for r in records if not r.quarantined]
    if not active:
        return Allocation(actors, reasons)
    slots = budget.slots
    w = np.array([r.weight for r in active])
    w_share = w / w.sum()
    quota = slots * w_share
    targets = w_share.copy()
    notes = [f"{policy}: weight share {s:.1%}" for s in w_share]
    warm = [i for i, r in enumerate(active) if r.warm] if rule is not None else []
    for i, r in enumerate(active):
        if rule is not None and not r.warm:
            notes[i] = f"not warm yet: fixed split, weight share {w_share[i]:.1%}"
    if warm:
        warm_recs = [active[i] for i in warm]
        shares, warm_notes = rule(warm_recs, w_share[warm], budget)
        targets[warm] = shares
        rates = np.array([r.steps_per_s for r in warm_recs], dtype=float)
        need = shares / rates
        quota[warm] = slots * w_share[warm].sum() * need / need.sum()
        for k, i in enumerate(warm):
            r = active[i]
            jitter = "" if r.step_time_spread is None else f", jitter {r.step_time_spread:.2f}"
            notes[i] = (
                f"{policy}: {warm_notes[k]}target data share {shares[k]:.1%} at "
                f"{r.steps_per_s:.3g} steps/s/actor{jitter} (delivered {r.data_share:.1%})"
            )
    counts = apportion(quota, slots, budget.min_per_task)
    for i, r in enumerate(active):
        actors[r.name] = int(counts[i])
        floor = " (floor)" if counts[i] <= budget.min_per_task and quota[i] < counts[i] else ""
        reasons[r.name] = f"{notes[i]} -> {quota[i]:.2f} actors -> {counts[i]}{floor}"
    shares = {} if rule is None else {r.name: float(targets[i]) for i, r in enumerate(active)}
    return Allocation(actors, reasons, shares)


def fixed(records: Sequence[TaskRecord], budget: Budget) -> Allocation:
    """Actors proportional to configured weights, whatever the tasks' costs or progress."""
    return _allocate(records, budget, "fixed", None)


def _weight_shares(
    records: Sequence[TaskRecord], w_share: np.ndarray, budget: Budget
) -> tuple[np.ndarray, list[str]]:
    return w_share, [""] * len(records)


def balanced(records: Sequence[TaskRecord], budget: Budget) -> Allocation:
    """Actors ∝ weight / throughput, so learner data shares match weights (warm tasks)."""
    return _allocate(records, budget, "balanced", _weight_shares)


def gap_to_target(score: float | None, target: float | None) -> float:
    """How far ``score`` is below ``target``, relative to the target, in [0, 1]; 1 if unknown."""
    if score is None or target is None:
        return 1.0
    if target == 0:
        return 1.0 if score < 0 else 0.0
    return float(np.clip((target - score) / abs(target), 0.0, 1.0))


def relative_speed(progress: Sequence[float | None]) -> np.ndarray:
    """``|slope| / (|slope| + median |slope|)`` in [0, 1): 0.5 for the typical task, scale-free,
    and one runaway task cannot flatten the others (as dividing by the maximum would)."""
    speed = np.array([0.0 if p is None else abs(p) for p in progress])
    known = [abs(p) for p in progress if p is not None]
    mid = float(np.median(known)) if known else 0.0
    if mid <= 0:
        return (speed > 0).astype(float)
    return speed / (speed + mid)


def progress_per_target(progress: float | None, target: float | None) -> float | None:
    """A task's learning progress in fractions of its target per million env steps.

    Scores come in each task's own units (normalised only where the env declares its range),
    so raw slopes of different tasks are not comparable: InvertedPendulum's return moves by
    thousands per million steps, breakout's by tens. Dividing by the target puts every task
    with one on the scale its gap is measured in; a task without a target keeps its raw slope.
    """
    if progress is None or target is None or target == 0:
        return progress
    return progress / abs(target)


def priorities(records: Sequence[TaskRecord]) -> np.ndarray:
    """Half the gap to target plus half the relative learning speed (up or down), each
    task's speed measured against its own target."""
    gap = np.array([gap_to_target(r.score, r.target) for r in records])
    speed = relative_speed([progress_per_target(r.progress, r.target) for r in records])
    return 0.5 * gap + 0.5 * speed


def _progress_shares(
    records: Sequence[TaskRecord], w_share: np.ndarray, budget: Budget
) -> tuple[np.ndarray, list[str]]:
    prio = priorities(records)
    pool = w_share.sum()
    tilted = w_share * prio
    if tilted.sum() <= 0:
        tilted = w_share
    f = budget.floor_share
    shares = f * w_share + (1.0 - f) * pool * tilted / tilted.sum()
    notes = [
        f"gap {gap_to_target(r.score, r.target):.2f}, "
        f"progress {'?' if r.progress is None else f'{r.progress:+.3g}/M'}, "
        f"priority {p:.2f}, "
        for r, p in zip(records, prio, strict=True)
    ]
    return shares, notes


def progress(records: Sequence[TaskRecord], budget: Budget) -> Allocation:
    """More data to tasks far from target or changing fast; ``floor_share`` keeps the rest."""
    return _allocate(records, budget, "progress", _progress_shares)


BUILTIN: dict[str, tuple[Callable[[Sequence[TaskRecord], Budget], Allocation], str]] = {
    "fixed": (fixed, "actors proportional to task weights (IMPALA's equal split)"),
    "balanced": (balanced, "learner data shares match weights whatever the step costs"),
    "progress": (progress, "more data to tasks far from target or learning fast, with a floor"),
}
"""The built-in policies with one-line descriptions, registered by mtrl.scheduler.builtin."""
