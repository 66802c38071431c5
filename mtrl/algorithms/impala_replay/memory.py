"""The memory of an ``impala_replay`` run's replay, for the pre-flight estimate
(:mod:`mtrl.train.memory_estimate`): each task keeps ``capacity`` env steps as whole sequences
of one env copy's unroll, with the recurrent core's state at each one's start."""

from __future__ import annotations

import gymnasium as gym

from mtrl.algorithms.impala_replay.settings import ImpalaReplaySettings
from mtrl.config import LearnerConfig
from mtrl.learner.recurrent import state_size
from mtrl.replay import SequenceStorage

__all__ = ["replay_bytes"]


def replay_bytes(
    cfg: LearnerConfig,
    settings: ImpalaReplaySettings,
    obs_space: gym.Space,
    action_space: gym.Space,
) -> int:
    """Bytes of one task's replay: ``SequenceStorage.nbytes`` of ``capacity`` env steps as
    sequences of ``learner.unroll_length``, with the core's state floats per sequence."""
    state = 0 if cfg.model.core is None else state_size(cfg.model.core)
    sequences = settings.sequences(cfg.unroll_length)
    return SequenceStorage.nbytes(sequences, cfg.unroll_length, obs_space, action_space, state)
