"""One replay shard: the part of one or more tasks' replays that lives in one Ray actor.

A plain class (:mod:`mtrl.replay.sharded` runs it as a Ray actor beside the env actors). It
keeps a :class:`~mtrl.replay.task_replay.TaskReplay` per task it holds, built from a template
storage and the ``replay:`` section's sampler, and answers every call with the task's
:class:`ShardStats`, so the learner's front knows each shard's total mass without asking again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from mtrl.actors.unroll import UnrollBuffer
from mtrl.config.replay import ReplayConfig
from mtrl.replay.sampler_choice import make_sampler
from mtrl.replay.samplers import PrioritizedSampler
from mtrl.replay.storage import SequenceBatch, SequenceStorage, TransitionBatch, TransitionStorage
from mtrl.replay.task_replay import TaskReplay

__all__ = ["ReplayShard", "ShardStats"]


@dataclass(frozen=True)
class ShardStats:
    """A task's part of one shard: its total mass (``p^alpha`` summed, or the item count for a
    uniform sampler), the sampleable items, the smallest positive mass (``inf``: none) and the
    sampleable items the call added (inserts only)."""

    total: float = 0.0
    count: int = 0
    smallest: float = float("inf")
    added: int = 0


class ReplayShard:
    """The parts of tasks' replays one shard holds (see the module docstring)."""

    def __init__(self, replay: ReplayConfig) -> None:
        self.replay = replay
        self.replays: dict[int, TaskReplay] = {}

    def where(self) -> tuple[str, int]:
        """(the Ray node id it runs on, or "local"; its process id)."""
        try:
            import ray

            return ray.get_runtime_context().get_node_id(), os.getpid()
        except Exception:
            return "local", os.getpid()

    def open(
        self, task: int, template: TransitionStorage | SequenceStorage, num_segments: int
    ) -> ShardStats:
        """Hold ``num_segments`` segments of task ``task`` (a storage like ``template``); a
        task already held keeps its items."""
        if task not in self.replays:
            storage = template.empty_like(num_segments)
            self.replays[task] = TaskReplay(storage, make_sampler(self.replay, storage.capacity))
        return self.stats(task)

    def stats(self, task: int, added: int = 0) -> ShardStats:
        sampler = self.replays[task].sampler
        if isinstance(sampler, PrioritizedSampler):
            return ShardStats(sampler.tree.total, sampler.count, sampler.tree.min, added)
        return ShardStats(float(sampler.count), sampler.count, 1.0, added)

    def add(self, buf: UnrollBuffer) -> ShardStats:
        """Store one unroll of ``buf.task``."""
        _, sampleable = self.replays[buf.task].add_unroll(buf)
        return self.stats(buf.task, int(np.count_nonzero(sampleable)))

    def sample(
        self, task: int, n: int, seed: int
    ) -> tuple[TransitionBatch | SequenceBatch, np.ndarray, np.ndarray, ShardStats]:
        """``n`` items of ``task`` drawn in proportion to their masses: the batch, the items'
        local indices, their masses (for the front's importance weights) and the stats."""
        replay = self.replays[task]
        rng = np.random.default_rng(seed)
        sampler = replay.sampler
        if isinstance(sampler, PrioritizedSampler):
            indices = sampler.tree.sample(n, rng)
            masses = sampler.tree.get(indices)
        else:
            indices, _ = sampler.sample(n, rng)
            masses = np.ones(n)
        return replay.storage.get(indices), indices, masses, self.stats(task)

    def update_priorities(
        self, task: int, indices: np.ndarray, td_errors: np.ndarray
    ) -> ShardStats:
        self.replays[task].update_priorities(indices, td_errors)
        return self.stats(task)

    def state_dict(self, task: int) -> dict[str, Any]:
        return self.replays[task].state_dict()

    def load_state_dict(self, task: int, state: dict[str, Any]) -> ShardStats:
        self.replays[task].load_state_dict(state)
        return self.stats(task)
