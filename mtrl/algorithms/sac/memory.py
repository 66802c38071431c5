"""The memory of a SAC run's replay, for the pre-flight estimate
(:mod:`mtrl.train.memory_estimate`): each task keeps ``replay.capacity`` transitions (SAC's
:data:`~mtrl.algorithms.sac.settings.DEFAULT_CAPACITY` when null), stored as whole unrolls of
one env copy."""

from __future__ import annotations

import gymnasium as gym

from mtrl.algorithms.sac.settings import DEFAULT_CAPACITY, SacSettings
from mtrl.config import LearnerConfig
from mtrl.replay import TransitionStorage

__all__ = ["replay_bytes"]


def replay_bytes(
    cfg: LearnerConfig, settings: SacSettings, obs_space: gym.Space, action_space: gym.Space
) -> int:
    """Bytes of one task's replay: ``TransitionStorage.nbytes`` of ``replay.capacity``
    transitions in unrolls of ``learner.unroll_length``."""
    capacity = cfg.replay.capacity_or(DEFAULT_CAPACITY)
    return TransitionStorage.nbytes(capacity, cfg.unroll_length, obs_space, action_space)
