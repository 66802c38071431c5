"""The stacked SAC step's batch: each group of same-shaped tasks as one padded block.

Tasks whose observations have one shape and whose actions one kind and size form a
:class:`GroupSpec`. A gradient step's transitions of a group are a block ``[K_g, m_g, C_g]``:
task ``k``'s rows first in its slice (observation, next observation, action, reward,
terminated, importance weight, 1), then padding rows of zeros, ``m_g`` the group's largest
count. Every group's block and the per-task counts sit in one flat host buffer, moved to the
device in one copy (:class:`HostBatch`), then viewed per group (:class:`GroupBatch`).

The transitions are drawn exactly as the per-task step draws them: the same replay calls in
the same order (task by task, in the order of the ready tasks), so the same RNG gives the same
rows either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mtrl.learner.device import to_device

__all__ = ["GroupBatch", "GroupSpec", "HostBatch", "draw", "on_device"]


@dataclass(frozen=True)
class GroupSpec:
    """Tasks of one observation shape and one action kind and size (``act``: a ``Box``
    action's size, or a ``Discrete`` action's ``n``)."""

    tasks: tuple[int, ...]
    obs_shape: tuple[int, ...]
    box: bool
    act: int

    @property
    def obs_size(self) -> int:
        return int(np.prod(self.obs_shape))

    @property
    def act_cols(self) -> int:
        """Columns of a stored action: a Box action's size, one index for Discrete."""
        return self.act if self.box else 1

    @property
    def cols(self) -> int:
        return 2 * self.obs_size + self.act_cols + 4


@dataclass
class HostBatch:
    """A gradient step's transitions on the host: ``flat`` holds every group's block
    ``[K_g, rows[g], C_g]`` one after another, then the rows of each task ``[K]``;
    ``indices`` are the replay items drawn per task (for the priorities)."""

    flat: np.ndarray
    rows: list[int]
    counts: np.ndarray
    indices: dict[int, np.ndarray]


@dataclass
class GroupBatch:
    """One group's block on the device, as views: ``[K_g, m, ·]`` fields, ``mask`` 1 on a
    sampled row and 0 on padding, where ``weights`` is 0 too."""

    obs: torch.Tensor  # [K_g, m, obs] float
    next_obs: torch.Tensor
    actions: torch.Tensor  # [K_g, m, act] raw Box actions, or [K_g, m] Discrete indices
    rewards: torch.Tensor  # [K_g, m]
    terminated: torch.Tensor  # [K_g, m] float 0/1
    weights: torch.Tensor  # [K_g, m] importance weights, 0 on padding
    mask: torch.Tensor  # [K_g, m]


def draw(
    groups: Sequence[GroupSpec],
    replays: Sequence,
    ready: Sequence[int],
    counts: Sequence[int],
    rng: np.random.Generator,
    rows: Sequence[int] | None = None,
) -> HostBatch:
    """``counts[i]`` transitions of task ``ready[i]``, laid out per group with at least
    ``rows[g]`` rows per task (each group's largest count where that is more)."""
    num_tasks = sum(len(g.tasks) for g in groups)
    want = np.zeros(num_tasks, np.int64)
    want[list(ready)] = counts
    where = {t: (gi, i) for gi, g in enumerate(groups) for i, t in enumerate(g.tasks)}
    m = [
        max(1 if rows is None else int(rows[gi]), int(want[list(g.tasks)].max()))
        for gi, g in enumerate(groups)
    ]
    sizes = [len(g.tasks) * mg * g.cols for g, mg in zip(groups, m, strict=True)]
    flat = np.zeros(sum(sizes) + num_tasks, np.float32)
    blocks, at = [], 0
    for g, mg, size in zip(groups, m, sizes, strict=True):
        blocks.append(flat[at : at + size].reshape(len(g.tasks), mg, g.cols))
        at += size
    indices: dict[int, np.ndarray] = {}
    for task, n in zip(ready, counts, strict=True):
        if not n:
            continue
        gi, i = where[task]
        g, n = groups[gi], int(n)
        tb, idx, weights = replays[task].sample(n, rng)
        o, a = g.obs_size, g.act_cols
        part = blocks[gi][i, :n]
        part[:, :o] = tb.obs.reshape(n, o)
        part[:, o : 2 * o] = tb.next_obs.reshape(n, o)
        part[:, 2 * o : 2 * o + a] = tb.actions.reshape(n, a)
        part[:, -4] = tb.rewards
        part[:, -3] = tb.terminated
        part[:, -2] = weights
        part[:, -1] = 1.0
        indices[task] = idx
    flat[at:] = want
    return HostBatch(flat, m, want.astype(np.float32), indices)


def views(
    groups: Sequence[GroupSpec], rows: Sequence[int], flat: torch.Tensor
) -> tuple[list[GroupBatch], torch.Tensor]:
    """Each group's :class:`GroupBatch` and the per-task counts ``[K]``, as views of a
    device copy of :attr:`HostBatch.flat` laid out with ``rows`` per group."""
    out, at = [], 0
    for g, m in zip(groups, rows, strict=True):
        size = len(g.tasks) * m * g.cols
        block = flat[at : at + size].view(len(g.tasks), m, g.cols)
        at += size
        o, a = g.obs_size, g.act_cols
        actions = block[..., 2 * o : 2 * o + a]
        out.append(
            GroupBatch(
                obs=block[..., :o],
                next_obs=block[..., o : 2 * o],
                actions=actions if g.box else actions[..., 0].long(),
                rewards=block[..., -4],
                terminated=block[..., -3],
                weights=block[..., -2],
                mask=block[..., -1],
            )
        )
    return out, flat[at:]


def on_device(
    groups: Sequence[GroupSpec], host: HostBatch, device: torch.device
) -> tuple[list[GroupBatch], torch.Tensor]:
    """``host`` on ``device`` (one copy), viewed per group, and the counts ``[K]``."""
    return views(groups, host.rows, to_device(host.flat, device))
