"""SAC's replay mirrored on the GPU and drawn there: a gradient step with no host in its loop.

With the stacked step replayed as one CUDA graph, the host's part of a gradient step is its
replay draw: numpy sampling and gathering of each task's rows, and one copy. On MT10's shapes
on an H200 the host took 0.7–1.6 ms to queue a step the device ran in ~0.8 ms, so the step's
pace was the host's, and the host's share of the machine was taken from the actors; for images
the gather alone is slower (an Atari batch: 5 ms on the host, 0.24 ms on the device;
docs/BENCHMARKS.md). Here every stacked group's replay is mirrored in device memory and each
gradient step draws its rows there, inside the same graph; what crosses from the host per step
is the batch's per-task counts (``[K]`` numbers), and the host queues a step in ~0.25 ms.

**The mirror.** For a group of ``K_g`` tasks, each field the step reads is one device tensor
with the task as its leading axis and the host storage's layout after it (observations
``[K_g, S, T + 1, *obs]`` in their stored dtype, actions ``[K_g, S, T, *act]``, rewards and
episode ends ``[K_g, S, T]``; :mod:`mtrl.replay.storage`), so it takes the same bytes as the host
replay. A segment is copied in when the host writes it (:meth:`DeviceReplay.write`, once per
unroll), and all of it after a checkpoint is loaded (:meth:`DeviceReplay.reload`). The host
replay stays the one of record: checkpoints, priorities and statistics read it as before.

**The draw is the host sampler's distribution.** Item ``i`` (step ``i % T`` of segment
``i // T``) may be drawn when the host sampler says it is sampleable (``live``: written and not
a reset step). The mirror keeps each task's running count of live items ``cum[k, i] = live[k,
:i + 1].sum()``; a row draws ``j`` uniformly in ``[0, cum[k, -1])`` and takes the item where
``cum`` first exceeds ``j`` (``searchsorted``): exactly uniform over the live items, as
:class:`~mtrl.replay.samplers.UniformSampler` is, without rejection rounds and without the host.
The draw's random numbers come from torch's generator of the device (seeded from the run's
seed), not the host's, so the rows differ from the host path's; the batch's task mix (how many
rows of each task) is still split on the host, by the same rule.

:func:`why_not` says when a learner keeps the host draw: prioritized replay (its sum-trees live
on the host), sharded replay (in Ray actors), data-parallel replicas, the per-task step; by
default the mirror is also kept to CUDA devices whose step is replayed as a graph and to
mirrors that take at most :data:`MEMORY_SHARE` of the device's free memory
(``learner.sac.draw_on_device`` decides otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mtrl.algorithms.sac import graphed
from mtrl.algorithms.sac.stacked_batch import GroupBatch, GroupSpec
from mtrl.learner.device import to_device

__all__ = ["MEMORY_SHARE", "DeviceReplay", "Request", "mirror_nbytes", "why_not"]

MEMORY_SHARE = 0.25
"""The largest share of the device's free memory the mirror may take by default."""

FIELDS = ("obs", "actions", "rewards", "terminated")
"""The host storage's fields the step reads (the mirror holds these)."""

SacLearner = Any
"""A :class:`~mtrl.algorithms.sac.learner.SacLearner`."""


def mirror_nbytes(learner: SacLearner) -> int:
    """Device bytes the mirror of ``learner``'s replays takes: the fields it holds, as stored,
    plus the live flags and their running counts (9 bytes an item)."""
    total = 0
    for replay in learner.replays:
        arrays = replay.storage.arrays
        total += sum(arrays[f].nbytes for f in FIELDS) + 9 * replay.storage.capacity
    return total


def why_not(learner: SacLearner) -> str | None:
    """Why ``learner`` draws its batches on the host, or None where they are drawn on its
    device (``learner.sac.draw_on_device``: None where it pays, True wherever it can be)."""
    wanted = learner.sac.draw_on_device
    if wanted is False:
        return "learner.sac.draw_on_device is false"
    if learner.stacked is None:
        return "the tasks take the per-task step (mtrl.algorithms.sac.stacked_step.why_not)"
    if learner.cfg.replay.prioritized:
        return "prioritized replay (its sum-trees live on the host)"
    if learner.cfg.replay.shards is not None:
        return "sharded replay (its items live in Ray actors)"
    if learner.distributed:
        return "data-parallel replicas"
    if wanted:
        return None
    device = learner.device
    if device.type != "cuda":
        return f"the learner is on {device.type}, not a CUDA GPU"
    if learner.stacked.graphed is None:
        return f"the step is not a CUDA graph ({graphed.why_not(learner)})"
    free, _ = torch.cuda.mem_get_info(device)
    need = mirror_nbytes(learner)
    if need > MEMORY_SHARE * free:
        return (
            f"the mirror would take {need / 2**20:.0f} MiB, more than {MEMORY_SHARE:.0%} of "
            f"the device's {free / 2**20:.0f} MiB free"
        )
    return None


@dataclass
class Request:
    """What crosses from the host for one gradient step: each task's rows (``flat``, float32
    ``[K]``) and the rows per task of each group's block (the graph's input layout, as
    :class:`~mtrl.algorithms.sac.stacked_batch.HostBatch` has them)."""

    flat: np.ndarray
    rows: list[int]


class _GroupMirror:
    """One group's fields on the device, the tasks' live flags and their running counts."""

    def __init__(self, group: GroupSpec, replays: Sequence[Any], device: torch.device) -> None:
        storages = [replays[t].storage for t in group.tasks]
        first = storages[0]
        self.segments, self.length = first.num_segments, first.unroll_length
        k, s, t = len(group.tasks), self.segments, self.length
        self.fields = {
            name: torch.zeros(
                (k, *first.arrays[name].shape),
                dtype=torch.from_numpy(first.arrays[name][:0]).dtype,
                device=device,
            )
            for name in FIELDS
        }
        self.live = torch.zeros((k, s * t), dtype=torch.bool, device=device)
        self.cum = torch.zeros((k, s * t), dtype=torch.int64, device=device)
        self.base = (torch.arange(k, device=device) * s).unsqueeze(1)
        """Each task's first segment in the fields viewed as ``[K_g * S, ...]``."""


class DeviceReplay:
    """The mirror of a stacked learner's replays, group by group (see the module docstring)."""

    def __init__(
        self, groups: Sequence[GroupSpec], replays: Sequence[Any], device: torch.device
    ) -> None:
        self.groups = list(groups)
        self.replays = replays
        self.device = device
        self.mirrors = [_GroupMirror(g, replays, device) for g in self.groups]
        self.where = {t: (gi, i) for gi, g in enumerate(self.groups) for i, t in enumerate(g.tasks)}
        self._index = [torch.tensor(g.tasks, device=device) for g in self.groups]

    # -- keeping the mirror in step with the host ------------------------------------------------

    def write(self, task: int, items: np.ndarray, live: np.ndarray) -> None:
        """Copy the segments holding ``items`` (what the host storage just wrote, with their
        ``live`` flags, as :meth:`~mtrl.replay.storage.TransitionStorage.add_unroll` returns
        them) from task ``task``'s host storage to the mirror."""
        gi, i = self.where[task]
        mirror = self.mirrors[gi]
        items = np.asarray(items, np.int64)
        slots = np.unique(items // mirror.length)
        index = to_device(torch.from_numpy(slots), self.device)
        arrays = self.replays[task].storage.arrays
        for name, dst in mirror.fields.items():
            dst[i].index_copy_(0, index, to_device(arrays[name][slots], self.device))
        flags = to_device(torch.from_numpy(np.asarray(live, bool)), self.device)
        mirror.live[i].index_copy_(0, to_device(torch.from_numpy(items), self.device), flags)
        torch.cumsum(mirror.live[i], 0, out=mirror.cum[i])

    def reload(self) -> None:
        """Copy every task's host replay to the mirror (after a checkpoint is loaded)."""
        for task, (gi, i) in self.where.items():
            mirror, replay = self.mirrors[gi], self.replays[task]
            for name, dst in mirror.fields.items():
                dst[i].copy_(to_device(replay.storage.arrays[name], self.device))
            live = replay.sampler.state_dict()["live"]
            mirror.live[i].copy_(to_device(live, self.device))
            torch.cumsum(mirror.live[i], 0, out=mirror.cum[i])

    # -- drawing ---------------------------------------------------------------------------------

    def request(
        self, ready: Sequence[int], counts: Sequence[int], rows: Sequence[int] | None
    ) -> Request:
        """The host's part of a step: ``counts[i]`` rows of task ``ready[i]``, laid out with at
        least ``rows`` rows per task in each group (each group's largest count where more)."""
        want = np.zeros(sum(len(g.tasks) for g in self.groups), np.float32)
        want[list(ready)] = counts
        need = [int(want[list(g.tasks)].max(initial=0)) for g in self.groups]
        if rows is not None:
            need = [max(int(r), n) for r, n in zip(rows, need, strict=True)]
        return Request(want, [max(n, 1) for n in need])

    def draw(
        self, counts: torch.Tensor, rows: Sequence[int]
    ) -> tuple[list[GroupBatch], list[torch.Tensor]]:
        """Each group's batch of ``rows[g]`` rows per task, drawn on the device, rows past a
        task's count (``counts``, ``[K]``) masked out; and the items drawn ``[K_g, m]`` (for
        tests). No host synchronisation: a CUDA graph can capture it."""
        out, items = [], []
        for g, mirror, index, m in zip(self.groups, self.mirrors, self._index, rows, strict=True):
            cum, t = mirror.cum, mirror.length
            live = cum[:, -1:]  # [K_g, 1] live items per task
            u = torch.rand((len(g.tasks), m), device=self.device)
            j = torch.minimum((u * live).long(), (live - 1).clamp(min=0))
            item = torch.searchsorted(cum, j, right=True).clamp_(max=cum.shape[1] - 1)
            seg, step = mirror.base + item.div(t, rounding_mode="floor"), item.remainder(t)
            f = mirror.fields
            obs = f["obs"].flatten(0, 1)
            n = len(g.tasks)
            mask = torch.arange(m, device=self.device) < counts.index_select(0, index)[:, None]
            mask = mask.float()
            actions = f["actions"].flatten(0, 1)[seg, step]
            out.append(
                GroupBatch(
                    obs=obs[seg, step].reshape(n, m, g.obs_size).float(),
                    next_obs=obs[seg, step + 1].reshape(n, m, g.obs_size).float(),
                    actions=actions.reshape(n, m, g.act).float() if g.box else actions.long(),
                    rewards=f["rewards"].flatten(0, 1)[seg, step].float(),
                    terminated=f["terminated"].flatten(0, 1)[seg, step].float(),
                    weights=mask,
                    mask=mask,
                )
            )
            items.append(item)
        return out, items
