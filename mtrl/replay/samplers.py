"""Which stored items a learner trains on: uniform and prioritized sampling.

Both samplers address the items ``[0, capacity)`` of one storage (transitions or sequences,
:mod:`mtrl.replay.storage`) and learn which of them hold sampleable data from :meth:`add`,
called with what ``add_unroll`` returns: an overwritten item takes its new data's status, and
reset steps (or sequences with nothing to train on) are never drawn.

:class:`PrioritizedSampler` is proportional prioritized replay (Schaul et al. 2016, "Prioritized
Experience Replay"): item ``i`` is drawn with probability ``P(i) = p_i^alpha / sum_k p_k^alpha``
with ``p_i = |delta_i| + eps`` from its last TD error, new items get the largest ``p`` seen so
far (so each is seen at least once soon), and the bias is corrected by importance-sampling
weights ``w_i = (N * P(i))^-beta / max_j w_j`` (``N`` the sampleable items), which only ever
scale an update down. See docs/REPLAY.md for the derivation of the normalised form used here.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import numpy as np
import torch

from mtrl.replay.state import require
from mtrl.replay.sum_tree import SumTree, last_writes

__all__ = ["PrioritizedSampler", "Sampler", "UniformSampler", "sequence_priorities"]


def _flags(indices: np.ndarray, sampleable: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Flat ``indices`` and their sampleable flags (all true when ``sampleable`` is None)."""
    indices = np.asarray(indices, np.int64).ravel()
    if sampleable is None:
        return indices, np.ones(indices.shape, bool)
    return indices, np.asarray(sampleable, bool).ravel()


class Sampler(Protocol):
    """The interface a replay learner (or, later, a replay shard behind a Ray actor) uses."""

    capacity: int

    def add(self, indices: np.ndarray, sampleable: np.ndarray | None = None) -> None:
        """Items ``indices`` were (over)written; ``sampleable[k]`` false keeps item ``k`` out."""

    def sample(self, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``batch_size`` item indices (with replacement) and their float32 loss weights."""

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Feed back the TD errors of sampled items (a no-op for uniform sampling)."""

    @property
    def count(self) -> int:
        """Items that can be drawn now."""

    def state_dict(self) -> dict[str, Any]:
        """Plain data for a checkpoint."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""


class UniformSampler:
    """Every sampleable item equally likely; weights are all one."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._live = np.zeros(capacity, bool)
        self._count = 0
        self._high = 0  # one past the highest index ever added: the range draws come from

    @property
    def count(self) -> int:
        return self._count

    def add(self, indices: np.ndarray, sampleable: np.ndarray | None = None) -> None:
        indices, flags = _flags(indices, sampleable)
        if indices.size == 0:
            return
        keep = last_writes(indices)
        indices, flags = indices[keep], flags[keep]
        self._count += int(flags.sum()) - int(self._live[indices].sum())
        self._live[indices] = flags
        self._high = max(self._high, int(indices[-1]) + 1)

    def sample(self, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Uniform over the sampleable items: draws in ``[0, high)`` with the unsampleable ones
        redrawn (exact; at least half are accepted per round), or a draw from the list of
        sampleable items when fewer than half of the range are."""
        if self._count == 0:
            raise ValueError("cannot sample: the replay holds no sampleable items yet")
        if 2 * self._count < self._high:
            return rng.choice(np.flatnonzero(self._live), batch_size), _ones(batch_size)
        indices = rng.integers(0, self._high, batch_size)
        redraw = np.flatnonzero(~self._live[indices])
        while redraw.size:
            indices[redraw] = rng.integers(0, self._high, redraw.size)
            redraw = redraw[~self._live[indices[redraw]]]
        return indices, _ones(batch_size)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Uniform sampling keeps no priorities."""

    def state_dict(self) -> dict[str, Any]:
        return {"kind": "uniform", "live": torch.from_numpy(self._live), "high": self._high}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        require(state, "kind", "uniform", "uniform sampler")
        live = state["live"].numpy()
        if live.shape != self._live.shape:
            raise ValueError(
                f"uniform sampler: the state has {live.shape[0]} items, this one "
                f"{self.capacity}; build it with the storage's capacity"
            )
        self._live[:] = live
        self._count = int(live.sum())
        self._high = int(state["high"])


def _ones(n: int) -> np.ndarray:
    return np.ones(n, np.float32)


class PrioritizedSampler:
    """Proportional prioritized sampling over a :class:`~mtrl.replay.sum_tree.SumTree`.

    The tree holds ``p_i^alpha`` (zero for unsampleable items). ``normalise`` picks what the
    largest weight is taken over: ``"buffer"`` (all sampleable items, as the paper's
    Algorithm 1; the weights of one item do not depend on what else was drawn) or ``"batch"``
    (the drawn items only; the largest weight of every batch is exactly 1). ``beta`` may be
    annealed towards 1 by the learner between draws (Schaul et al. anneal it linearly).
    """

    def __init__(
        self,
        capacity: int,
        alpha: float = 0.6,
        beta: float = 0.4,
        eps: float = 1e-6,
        normalise: Literal["buffer", "batch"] = "buffer",
    ) -> None:
        if alpha < 0 or not 0 <= beta <= 1 or eps <= 0:
            raise ValueError(
                f"prioritized sampler: need alpha >= 0, 0 <= beta <= 1 and eps > 0; got "
                f"alpha={alpha}, beta={beta}, eps={eps}"
            )
        if normalise not in ("buffer", "batch"):
            raise ValueError(
                f"prioritized sampler: normalise must be 'buffer' or 'batch', got {normalise!r}"
            )
        self.capacity = capacity
        self.alpha, self.beta, self.eps, self.normalise = alpha, beta, eps, normalise
        self.tree = SumTree(capacity)
        self.max_priority = 1.0  # the largest |delta| + eps seen, given to new items

    @property
    def count(self) -> int:
        return self.tree.count

    def add(self, indices: np.ndarray, sampleable: np.ndarray | None = None) -> None:
        indices, flags = _flags(indices, sampleable)
        self.tree.update(indices, np.where(flags, self.max_priority**self.alpha, 0.0))

    def sample(self, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Stratified proportional draws and their normalised importance weights.

        ``w_i / max_j w_j = (P_min / P(i))^beta = (p_min^alpha / p_i^alpha)^beta``: the
        number of items and the total cancel, so only the tree's leaves are needed.
        """
        if self.tree.count == 0:
            raise ValueError("cannot sample: the replay holds no sampleable items yet")
        indices = self.tree.sample(batch_size, rng)
        leaves = self.tree.get(indices)
        smallest = self.tree.min if self.normalise == "buffer" else leaves.min()
        return indices, ((smallest / leaves) ** self.beta).astype(np.float32)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """``p = |td_error| + eps`` for the items drawn (the last of a repeated index wins).

        Items that became unsampleable since they were drawn (overwritten by a reset step)
        keep priority zero, so stale feedback never revives them.
        """
        indices = np.asarray(indices, np.int64).ravel()
        priorities = np.abs(np.asarray(td_errors, np.float64).ravel()) + self.eps
        if not np.isfinite(priorities).all():
            raise ValueError("prioritized sampler: non-finite TD errors")
        live = self.tree.get(indices) > 0
        if not live.any():
            return
        self.max_priority = max(self.max_priority, float(priorities[live].max()))
        self.tree.update(indices[live], priorities[live] ** self.alpha)

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "prioritized",
            "alpha": self.alpha,
            "leaves": torch.from_numpy(self.tree.leaves.copy()),
            "max_priority": self.max_priority,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the priorities; ``alpha`` must match (the leaves are ``p^alpha``)."""
        where = "prioritized sampler"
        require(state, "kind", "prioritized", where)
        require(state, "alpha", self.alpha, where)
        self.tree.load_leaves(state["leaves"].numpy())
        self.max_priority = float(state["max_priority"])


def sequence_priorities(td_errors: np.ndarray, mask: np.ndarray, eta: float = 0.9) -> np.ndarray:
    """R2D2's priority of each sequence of ``[T, n]`` TD errors: ``eta * max |delta| + (1 -
    eta) * mean |delta|`` over the steps ``mask`` keeps (Kapturowski et al. 2019, sec. 2.3);
    zero for a sequence with no step kept."""
    abs_td = np.where(mask, np.abs(td_errors), 0.0)
    steps = mask.sum(axis=0)
    mean = abs_td.sum(axis=0) / np.maximum(steps, 1)
    return eta * abs_td.max(axis=0) + (1 - eta) * mean
