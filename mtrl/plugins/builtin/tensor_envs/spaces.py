"""The tensor envs' spaces (gymnasium's classic-control ones) and the constants bounding them.

Torch-free, so the ``tensor`` plugin declares each env's spaces when it registers it instead of
building one (which imports torch, seconds of ``mtrl envs``). The env classes take their spaces
and these constants from here, so declared and built spaces cannot drift apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from gymnasium import spaces

CARTPOLE_X_THRESHOLD = 2.4
CARTPOLE_THETA_THRESHOLD = 12 * 2 * math.pi / 360
ACROBOT_MAX_VEL_1 = 4 * math.pi
ACROBOT_MAX_VEL_2 = 9 * math.pi
PENDULUM_MAX_SPEED = 8.0
PENDULUM_MAX_TORQUE = 2.0
MOUNTAIN_CAR_MIN_POSITION = -1.2
MOUNTAIN_CAR_MAX_POSITION = 0.6
MOUNTAIN_CAR_MAX_SPEED = 0.07


def _box(low: list[float], high: list[float]) -> spaces.Box:
    return spaces.Box(np.array(low, np.float32), np.array(high, np.float32), dtype=np.float32)


def _symmetric(high: list[float]) -> spaces.Box:
    return _box([-h for h in high], high)


_SPACES: dict[str, Callable[[], tuple[spaces.Space, spaces.Space]]] = {
    "CartPole-v1": lambda: (
        _symmetric([CARTPOLE_X_THRESHOLD * 2, np.inf, CARTPOLE_THETA_THRESHOLD * 2, np.inf]),
        spaces.Discrete(2),
    ),
    "Acrobot-v1": lambda: (
        _symmetric([1.0, 1.0, 1.0, 1.0, ACROBOT_MAX_VEL_1, ACROBOT_MAX_VEL_2]),
        spaces.Discrete(3),
    ),
    "Pendulum-v1": lambda: (
        _symmetric([1.0, 1.0, PENDULUM_MAX_SPEED]),
        _symmetric([PENDULUM_MAX_TORQUE]),
    ),
    "MountainCar-v0": lambda: (
        _box(
            [MOUNTAIN_CAR_MIN_POSITION, -MOUNTAIN_CAR_MAX_SPEED],
            [MOUNTAIN_CAR_MAX_POSITION, MOUNTAIN_CAR_MAX_SPEED],
        ),
        spaces.Discrete(3),
    ),
    "MountainCarContinuous-v0": lambda: (
        _box(
            [MOUNTAIN_CAR_MIN_POSITION, -MOUNTAIN_CAR_MAX_SPEED],
            [MOUNTAIN_CAR_MAX_POSITION, MOUNTAIN_CAR_MAX_SPEED],
        ),
        _symmetric([1.0]),
    ),
}


def cue_recall_spaces() -> tuple[spaces.Box, spaces.Discrete]:
    """Fresh (observation, action) spaces of ``memory/CueRecall-v0``: ``[cue is 0, cue is 1,
    query]`` and the two answers (:mod:`mtrl.plugins.builtin.tensor_envs.cue_recall`)."""
    return spaces.Box(0.0, 1.0, (3,), np.float32), spaces.Discrete(2)


def env_spaces(name: str) -> tuple[spaces.Space, spaces.Space]:
    """Fresh (observation, action) spaces of tensor env ``name`` (``"CartPole-v1"``); fresh
    because a space carries its own sampling RNG."""
    return _SPACES[name]()
