"""The size of an ``impala_replay`` run's replay: the sequences each task keeps
(:func:`sequences`, what the learner allocates) and their memory, for the pre-flight estimate
(:mod:`mtrl.train.memory_estimate`): ``replay.capacity`` env steps per task as whole sequences
of one env copy's unroll, with the recurrent core's state at each one's start."""

from __future__ import annotations

import gymnasium as gym

from mtrl.algorithms.impala_replay.settings import DEFAULT_CAPACITY, ImpalaReplaySettings
from mtrl.config import LearnerConfig
from mtrl.learner.recurrent import state_size
from mtrl.replay import SequenceStorage

__all__ = ["replay_bytes", "sequences"]


def sequences(cfg: LearnerConfig) -> int:
    """Sequences (one env copy's unroll each) a task's replay holds: ``replay.capacity`` env
    steps (:data:`~mtrl.algorithms.impala_replay.settings.DEFAULT_CAPACITY` when null) in
    unrolls of ``learner.unroll_length``, rounded up."""
    return -(-cfg.replay.capacity_or(DEFAULT_CAPACITY) // cfg.unroll_length)


def replay_bytes(
    cfg: LearnerConfig,
    settings: ImpalaReplaySettings,
    obs_space: gym.Space,
    action_space: gym.Space,
) -> int:
    """Bytes of one task's replay: ``SequenceStorage.nbytes`` of :func:`sequences` of
    ``learner.unroll_length``, with the core's state floats per sequence."""
    state = 0 if cfg.model.core is None else state_size(cfg.model.core)
    return SequenceStorage.nbytes(sequences(cfg), cfg.unroll_length, obs_space, action_space, state)
