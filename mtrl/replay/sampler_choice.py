"""The sampler the ``replay:`` section names, over the items of one storage: the one place
both the learner's own replays (:mod:`mtrl.replay.build`) and replay shards
(:mod:`mtrl.replay.shard`) build it."""

from __future__ import annotations

from mtrl.config.replay import ReplayConfig
from mtrl.replay.samplers import PrioritizedSampler, Sampler, UniformSampler

__all__ = ["make_sampler"]


def make_sampler(replay: ReplayConfig, capacity: int) -> Sampler:
    """The sampler ``replay.sampler`` names over items ``[0, capacity)`` of one storage:
    uniform, or prioritized with ``replay.priority_alpha`` and ``replay.priority_beta``."""
    if replay.prioritized:
        return PrioritizedSampler(capacity, replay.priority_alpha, replay.priority_beta)
    return UniformSampler(capacity)
