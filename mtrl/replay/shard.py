"""One replay shard: the part of one or more tasks' replays that lives in one Ray actor.

A plain class (:mod:`mtrl.replay.sharded` runs it as a Ray actor beside the env actors). It
keeps a :class:`~mtrl.replay.task_replay.TaskReplay` per task it holds, built from a template
storage and the ``replay:`` section's sampler, and answers every call with the task's
:class:`ShardStats`, so the learner's front knows each shard's total mass without asking again.

Unrolls come from the learner's front or straight from the Ray actors on the shard's node
(:mod:`mtrl.actors.shard_insert`), each insert tagged with where it came from
(:meth:`ReplayShard.sources`). With ``rate_limit.waits: actors`` the shard keeps its own
share of the samples-per-insert limiter (the error buffer and the minimum size split over the
task's shards, so the shards' bounds add up to the cluster's) and tells an actor whether an
insert now keeps its ratio (:meth:`ReplayShard.admits`).
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from mtrl.actors.unroll import UnrollBuffer
from mtrl.config.replay import ReplayConfig
from mtrl.replay.rate_limiter import RateLimiter
from mtrl.replay.sampler_choice import make_sampler
from mtrl.replay.samplers import PrioritizedSampler
from mtrl.replay.storage import SequenceBatch, SequenceStorage, TransitionBatch, TransitionStorage
from mtrl.replay.task_replay import TaskReplay

__all__ = ["ReplayShard", "ShardStats"]


@dataclass(frozen=True)
class ShardStats:
    """A task's part of one shard: its total mass (``p^alpha`` summed, or the item count for a
    uniform sampler), the sampleable items, the smallest positive mass (``inf``: none), the
    sampleable items inserted so far (whoever inserted them), and the answer's number and the
    shard's instance: of two answers of one shard the higher ``seq`` is the newer, whichever
    caller got it, and an answer of a shard since started again (another ``instance``) is
    stale."""

    total: float = 0.0
    count: int = 0
    smallest: float = float("inf")
    inserted: int = 0
    seq: int = -1
    instance: str = ""


class ReplayShard:
    """The parts of tasks' replays one shard holds (see the module docstring)."""

    def __init__(self, replay: ReplayConfig) -> None:
        self.replay = replay
        self.replays: dict[int, TaskReplay] = {}
        self.instance = uuid.uuid4().hex[:12]
        self.seq = 0
        self.inserted: Counter[int] = Counter()
        self.limiters: dict[int, RateLimiter] = {}
        self._sources: dict[int, Counter[str]] = {}

    def where(self) -> tuple[str, int]:
        """(the Ray node id it runs on, or "local"; its process id)."""
        try:
            import ray

            return ray.get_runtime_context().get_node_id(), os.getpid()
        except Exception:
            return "local", os.getpid()

    def open(
        self,
        task: int,
        template: TransitionStorage | SequenceStorage,
        num_segments: int,
        peers: int = 1,
    ) -> ShardStats:
        """Hold ``num_segments`` segments of task ``task`` (a storage like ``template``); a
        task already held keeps its items. ``peers``: the task's shards (this one included),
        over which the limiter's bounds are split."""
        if task not in self.replays:
            storage = template.empty_like(num_segments)
            self.replays[task] = TaskReplay(storage, make_sampler(self.replay, storage.capacity))
            self._sources[task] = Counter()
            limit = self.replay.shards.rate_limit if self.replay.shards is not None else None
            if limit is not None and limit.waits == "actors":
                self.limiters[task] = RateLimiter(
                    limit.samples_per_insert,
                    -(-limit.min_size_to_sample // peers),
                    limit.error_buffer / peers,
                )
        return self.stats(task)

    def stats(self, task: int) -> ShardStats:
        """Task ``task``'s stats now (each answer numbered: :class:`ShardStats`)."""
        self.seq += 1
        sampler = self.replays[task].sampler
        if isinstance(sampler, PrioritizedSampler):
            total, smallest = sampler.tree.total, sampler.tree.min
        else:
            total, smallest = float(sampler.count), 1.0
        n = self.inserted[task]
        return ShardStats(total, sampler.count, smallest, n, self.seq, self.instance)

    def add(self, buf: UnrollBuffer, source: str = "learner") -> ShardStats:
        """Store one unroll of ``buf.task``; ``source``: who sent it (the Ray node id of an
        actor on this shard's node, or ``learner``)."""
        _, sampleable = self.replays[buf.task].add_unroll(buf)
        added = int(np.count_nonzero(sampleable))
        self.inserted[buf.task] += added
        self._sources[buf.task][source] += 1
        if buf.task in self.limiters:
            self.limiters[buf.task].inserted(added)
        return self.stats(buf.task)

    def admits(self, task: int, items: int) -> bool:
        """Whether inserting ``items`` items of ``task`` keeps this shard's share of the
        samples-per-insert ratio (always, without ``waits: actors``)."""
        limiter = self.limiters.get(task)
        return limiter is None or limiter.can_insert(items)

    def sources(self) -> dict[int, dict[str, int]]:
        """Per task, unrolls inserted per sender (an actor's node id, or ``learner``)."""
        return {task: dict(c) for task, c in self._sources.items()}

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
        if task in self.limiters:
            self.limiters[task].sampled(n)
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
