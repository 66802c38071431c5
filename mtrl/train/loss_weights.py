"""Per-task loss weights that make each task's share of the learning signal match its target.

The actors deliver data at rates set by whole actors and each env's speed, so a task's share of
the learner's samples can sit far from its target share (its ``weight``, or the adaptive
policy's share). Holding data back to fix that idles the learner and the cores (the share gate
alone did). Weighting instead scales each task's loss by ``target share / recent data share``,
so the gradient sees every task in its target proportion whatever the data mix — the learner
meets the weights by weighting, never by waiting.

The weights are capped (``max_weight``: one task's few samples must not carry the whole loss,
whose variance grows with the weight) and normalised so the sample-weighted mean over the
governed tasks is 1: the step size does not change with the mix. A capped task is one the
budget cannot serve; :func:`capped_tasks` names them so the run can say what to change.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def loss_weights(counts: np.ndarray, targets: np.ndarray, max_weight: float) -> np.ndarray:
    """Loss multiplier per task from its recent samples ``counts`` and target ``targets``.

    A task with a NaN target or no recent samples is not governed: weight 1. Over the governed
    tasks, the targets are renormalised to sum to 1 and task i gets ``t_i / s_i`` (``s_i`` its
    share of the governed samples), clipped to ``[1 / max_weight, max_weight]``, then all are
    scaled so ``sum(s_i * w_i) = 1``. Pure: no state.
    """
    counts = np.asarray(counts, dtype=float)
    targets = np.asarray(targets, dtype=float)
    w = np.ones(len(counts))
    governed = ~np.isnan(targets) & (counts > 0) & (np.nan_to_num(targets) > 0)
    if governed.sum() < 2:
        return w
    s = counts[governed] / counts[governed].sum()
    t = targets[governed] / targets[governed].sum()
    raw = np.clip(t / s, 1.0 / max_weight, max_weight)
    w[governed] = raw / float((s * raw).sum())
    # Data already in the target mix weighs exactly 1, not 1 up to rounding: the loss (and a
    # deterministic run) is then bit for bit what it is without weighting.
    w[np.isclose(w, 1.0, rtol=0.0, atol=1e-9)] = 1.0
    return w


def capped_tasks(counts: np.ndarray, targets: np.ndarray, max_weight: float) -> list[int]:
    """Governed tasks whose data share is so far below target that the cap binds: their
    effective share stays under target, and only more data (actors, envs) can fix it."""
    counts = np.asarray(counts, dtype=float)
    targets = np.asarray(targets, dtype=float)
    governed = ~np.isnan(targets) & (counts > 0) & (np.nan_to_num(targets) > 0)
    if governed.sum() < 2:
        return []
    s = counts[governed] / counts[governed].sum()
    t = targets[governed] / targets[governed].sum()
    idx = np.flatnonzero(governed)
    return [int(i) for i, ratio in zip(idx, t / s, strict=True) if ratio > max_weight]


def effective_shares(counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Each task's share of the weighted learning signal: ``c_i w_i / sum(c w)``."""
    signal = np.asarray(counts, dtype=float) * np.asarray(weights, dtype=float)
    total = signal.sum()
    return signal / total if total > 0 else np.zeros(len(signal))


def weight_shortfalls(
    weights: Sequence[float], columns: Sequence[float], max_weight: float
) -> list[tuple[int, float, float]]:
    """Tasks whose weight share is more than ``max_weight`` times their share of the env
    copies stepped (``columns``: actors x envs per actor, per task), as ``(task, weight share,
    column share)``. Assuming equal step costs, loss weighting cannot bring them to their
    weight: what ``validate`` can tell before a run (the run itself measures the real data)."""
    w = np.asarray(weights, dtype=float)
    c = np.asarray(columns, dtype=float)
    if len(w) < 2 or c.sum() <= 0:
        return []
    w_share, c_share = w / w.sum(), c / c.sum()
    return [
        (i, float(w_share[i]), float(c_share[i]))
        for i in range(len(w))
        if c_share[i] == 0 or w_share[i] / c_share[i] > max_weight
    ]
