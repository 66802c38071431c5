"""The memory of a SAC run's replay, for the pre-flight estimate
(:mod:`mtrl.train.memory_estimate`): each task keeps ``replay_capacity`` transitions, stored as
whole unrolls of one env copy."""

from __future__ import annotations

import gymnasium as gym

from mtrl.algorithms.sac.settings import SacSettings
from mtrl.config import LearnerConfig
from mtrl.replay import TransitionStorage

__all__ = ["replay_bytes"]


def replay_bytes(
    cfg: LearnerConfig, settings: SacSettings, obs_space: gym.Space, action_space: gym.Space
) -> int:
    """Bytes of one task's replay: ``TransitionStorage.nbytes`` of ``replay_capacity``
    transitions in unrolls of ``learner.unroll_length``."""
    return TransitionStorage.nbytes(
        settings.replay_capacity, cfg.unroll_length, obs_space, action_space
    )
