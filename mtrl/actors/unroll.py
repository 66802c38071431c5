"""The unroll: one task's fixed-length, time-major block of experience, preallocated.

An actor owns one :class:`UnrollBuffer` per batch env and fills it in place, so the hot path
allocates nothing. ``obs`` has ``T + 1`` rows: row ``T`` is the bootstrap observation, and it is
carried over as row 0 of the next unroll. ``valid[t]`` is false on reset steps (the step after an
episode end, see :mod:`mtrl.plugins.batch_env`), which the loss masks out.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ObsArray = np.ndarray | dict[str, np.ndarray]


def _alloc_obs(space: gym.Space, lead: tuple[int, ...]) -> ObsArray:
    if isinstance(space, spaces.Dict):
        return {k: _alloc_obs(s, lead) for k, s in space.spaces.items()}
    shape = () if isinstance(space, spaces.Discrete) else space.shape
    return np.zeros((*lead, *shape), dtype=space.dtype)


def raw_action_layout(space: gym.Space) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of one *raw* policy action (what the unroll stores) for ``space``."""
    if isinstance(space, spaces.Discrete):
        return (), np.dtype(np.int64)
    if isinstance(space, spaces.MultiDiscrete):
        return space.shape, np.dtype(np.int64)
    if isinstance(space, spaces.Box):
        return space.shape, np.dtype(np.float32)
    raise TypeError(f"no policy head for action space {space}")


def obs_row(obs: ObsArray, t: int | slice) -> ObsArray:
    """Row (or rows) ``t`` of a time-major observation array or dict of arrays."""
    return {k: v[t] for k, v in obs.items()} if isinstance(obs, dict) else obs[t]


@dataclass
class UnrollBuffer:
    """Preallocated storage for one unroll of ``T`` steps of ``N`` env copies of one task."""

    task: int
    obs: ObsArray  # [T+1, N, *obs]
    actions: np.ndarray  # [T, N, *raw_action]
    behaviour_logp: np.ndarray  # [T, N] float32
    rewards: np.ndarray  # [T, N] float32, reward_scale applied
    terminated: np.ndarray  # [T, N] bool
    truncated: np.ndarray  # [T, N] bool
    valid: np.ndarray  # [T, N] bool: false on reset steps
    policy_version: int = 0  # version of the weights that acted (oldest in the unroll)

    @classmethod
    def allocate(
        cls, task: int, T: int, N: int, obs_space: gym.Space, action_space: gym.Space
    ) -> UnrollBuffer:
        shape, dtype = raw_action_layout(action_space)
        return cls(
            task=task,
            obs=_alloc_obs(obs_space, (T + 1, N)),
            actions=np.zeros((T, N, *shape), dtype=dtype),
            behaviour_logp=np.zeros((T, N), np.float32),
            rewards=np.zeros((T, N), np.float32),
            terminated=np.zeros((T, N), bool),
            truncated=np.zeros((T, N), bool),
            valid=np.ones((T, N), bool),
        )

    @property
    def length(self) -> int:
        return self.rewards.shape[0]

    @property
    def num_envs(self) -> int:
        return self.rewards.shape[1]

    def copy(self) -> UnrollBuffer:
        """A snapshot the learner can keep while the actor refills this buffer."""
        obs = (
            {k: v.copy() for k, v in self.obs.items()}
            if isinstance(self.obs, dict)
            else self.obs.copy()
        )
        return UnrollBuffer(
            self.task,
            obs,
            self.actions.copy(),
            self.behaviour_logp.copy(),
            self.rewards.copy(),
            self.terminated.copy(),
            self.truncated.copy(),
            self.valid.copy(),
            self.policy_version,
        )
