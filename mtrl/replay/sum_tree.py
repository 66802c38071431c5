"""A vectorised sum-tree: proportional sampling over ``capacity`` non-negative priorities.

The tree is one flat float64 array of ``2 * size`` nodes, ``size`` the capacity rounded up to
a power of two: node 1 is the root, node ``i`` has children ``2i`` and ``2i + 1``, and the
leaves (the priorities, item ``j`` at node ``size + j``) fill ``[size, 2 * size)``. Every
internal node holds the sum of its two children, *recomputed* from them on each update (never
adjusted by a difference), so no rounding drift accumulates and a tree rebuilt from its leaves
is bit-identical to one updated step by step.

Both batch operations are O(batch x log size) with no Python loop over the batch, only over
the ``log2(size)`` levels: :meth:`SumTree.update` writes the leaves and then recomputes the
parents level by level (a parent shared by several updated leaves is written several times
with the same value); :meth:`SumTree.find` walks all queries down the tree together.

A second array tracks the minimum over the *positive* leaves (zero-priority items cannot be
sampled and must not set the importance-weight scale), for
:class:`~mtrl.replay.samplers.PrioritizedSampler`'s normalisation.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SumTree", "last_writes"]


def last_writes(indices: np.ndarray) -> np.ndarray:
    """Positions in ``indices`` of the last occurrence of each distinct index (sorted by index).

    Used so that a batch update with repeated indices keeps the last value given for each, as
    a loop of single updates would.
    """
    _, first_in_reversed = np.unique(indices[::-1], return_index=True)
    return len(indices) - 1 - first_in_reversed


class SumTree:
    """Sums (and the positive minimum) of ``capacity`` priorities, all zero at the start."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"SumTree capacity must be at least 1, got {capacity}")
        self.capacity = int(capacity)
        self.size = 1 << (self.capacity - 1).bit_length()
        self.depth = self.size.bit_length() - 1  # levels between the root and the leaves
        self._sum = np.zeros(2 * self.size, np.float64)
        self._min = np.full(2 * self.size, np.inf, np.float64)
        self._count = 0

    @property
    def total(self) -> float:
        """Sum of all priorities."""
        return float(self._sum[1])

    @property
    def min(self) -> float:
        """Smallest positive priority (``inf`` when none is positive)."""
        return float(self._min[1])

    @property
    def count(self) -> int:
        """Number of positive priorities (items that can be sampled)."""
        return self._count

    @property
    def leaves(self) -> np.ndarray:
        """The ``capacity`` priorities (a read-only view)."""
        view = self._sum[self.size : self.size + self.capacity]
        view.flags.writeable = False
        return view

    def get(self, indices: np.ndarray) -> np.ndarray:
        """The priorities of ``indices``."""
        return self._sum[self.size + self._check(indices)]

    def _check(self, indices: np.ndarray) -> np.ndarray:
        indices = np.asarray(indices, np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= self.capacity):
            raise IndexError(f"SumTree indices must lie in [0, {self.capacity}), got {indices}")
        return indices

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set ``priorities[k]`` at ``indices[k]`` (finite, >= 0; the last write of a repeated
        index wins) and recompute the sums above them."""
        indices = self._check(np.ravel(indices))
        priorities = np.broadcast_to(np.asarray(priorities, np.float64), indices.shape)
        if not np.isfinite(priorities).all() or (priorities < 0).any():
            raise ValueError("SumTree priorities must be finite and >= 0")
        if indices.size == 0:
            return
        keep = last_writes(indices)
        nodes, values = indices[keep] + self.size, priorities[keep]
        self._count += int((values > 0).sum()) - int((self._sum[nodes] > 0).sum())
        self._sum[nodes] = values
        self._min[nodes] = np.where(values > 0, values, np.inf)
        for _ in range(self.depth):
            nodes = nodes >> 1
            left = 2 * nodes
            self._sum[nodes] = self._sum[left] + self._sum[left + 1]
            self._min[nodes] = np.minimum(self._min[left], self._min[left + 1])

    def find(self, prefix_sums: np.ndarray) -> np.ndarray:
        """For each ``v``, the item ``j`` with ``sum(p[:j]) <= v < sum(p[:j + 1])``.

        That is ``np.searchsorted(np.cumsum(p), v, side="right")`` for ``0 <= v < total``. A
        query never lands on a zero-priority item: at a node whose right subtree sums to zero
        the walk goes left, so a ``v`` pushed to ``total`` or beyond by rounding ends at the
        last positive item instead of an empty one (``total`` must be positive).
        """
        v = np.array(prefix_sums, np.float64, copy=True).ravel()
        nodes = np.ones(v.shape, np.int64)
        for _ in range(self.depth):
            left = 2 * nodes
            left_sum = self._sum[left]
            right = (v >= left_sum) & (self._sum[left + 1] > 0)
            v -= np.where(right, left_sum, 0.0)
            nodes = left + right
        return nodes - self.size

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """``batch_size`` items drawn in proportion to their priorities, stratified: the total
        is cut into ``batch_size`` equal segments and one point drawn uniformly in each
        (Schaul et al. 2016, appendix B.2.1). Each draw's marginal is exactly proportional."""
        total = self.total
        if not total > 0:
            raise ValueError("cannot sample from a SumTree whose priorities are all zero")
        points = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
        return self.find(points)

    def load_leaves(self, priorities: np.ndarray) -> None:
        """Replace all ``capacity`` priorities at once and rebuild the tree bottom-up."""
        priorities = np.asarray(priorities, np.float64)
        if priorities.shape != (self.capacity,):
            raise ValueError(
                f"SumTree of capacity {self.capacity} got {priorities.shape[0]} priorities"
            )
        self._sum[:] = 0.0
        self._min[:] = np.inf
        self._count = 0
        self.update(np.arange(self.capacity), priorities)
