"""Adapters that turn gymnasium environments into mtrl batch envs.

A plugin author who knows gymnasium needs nothing else: :func:`batch_env_from_gymnasium` wraps a
single-env factory in gymnasium's :class:`~gymnasium.vector.SyncVectorEnv`; a native vector env
(numpy-batched, C++ pools) is wrapped directly by :class:`GymVectorBatchEnv`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

from mtrl.plugins.batch_env import BatchEnv, Obs, StepBatch


class GymVectorBatchEnv(BatchEnv):
    """A gymnasium ``VectorEnv`` that auto-resets on the next step, seen as a :class:`BatchEnv`."""

    def __init__(self, vector_env: VectorEnv, seed: int | None = None) -> None:
        mode = vector_env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        if AutoresetMode(mode) is not AutoresetMode.NEXT_STEP:
            raise ValueError(
                f"{type(vector_env).__name__} auto-resets in mode {mode!s}; mtrl's batch-env "
                "contract needs AutoresetMode.NEXT_STEP"
            )
        self._env = vector_env
        self._seed = seed
        self._seeded = False
        self._closed = False
        self._reports_success = False
        self.num_envs = vector_env.num_envs
        self.single_observation_space = vector_env.single_observation_space
        self.single_action_space = vector_env.single_action_space

    def reset(self) -> Obs:
        seed = None if self._seeded else self._seed
        self._seeded = True
        obs, _ = self._env.reset(seed=seed)
        if seed is not None:
            # Seed the action spaces too, so random-action drivers are reproducible.
            self._env.action_space.seed(seed)
        return obs

    def step(self, actions: Any) -> StepBatch:
        obs, reward, terminated, truncated, info = self._env.step(actions)
        success = success_flags(info, self.num_envs)
        if success is not None:
            self._reports_success = True
        elif self._reports_success:  # a step where every copy reset: their infos are empty
            success = np.zeros(self.num_envs, bool)
        return StepBatch(
            obs=obs,
            reward=np.asarray(reward, dtype=np.float32),
            terminated=np.asarray(terminated, dtype=bool),
            truncated=np.asarray(truncated, dtype=bool),
            success=success,
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._env.close()


SUCCESS_KEYS = ("success", "is_success")
"""Info keys that carry a task's success flag: Meta-World's, and gymnasium-robotics'."""


def success_flags(info: dict[str, Any], num_envs: int) -> np.ndarray | None:
    """The per-copy success flags in a vector env's ``info`` (None when it has none).

    Gymnasium's vector envs gather each copy's info into arrays with a ``_<key>`` mask of the
    copies that reported it; a copy that did not (a reset step) counts as not successful."""
    for key in SUCCESS_KEYS:
        if key in info:
            flags = np.asarray(info[key]).astype(bool).reshape(num_envs)
            mask = info.get(f"_{key}")
            return flags & np.asarray(mask, bool) if mask is not None else flags
    return None


def batch_env_from_gymnasium(
    env_fn: Callable[[], gym.Env], num_envs: int, seed: int | None = None
) -> BatchEnv:
    """Step ``num_envs`` copies made by ``env_fn`` in one process (gymnasium's SyncVectorEnv).

    Process-per-env vectorisation loses on few cores (docs/BENCHMARKS.md); for speed implement
    :class:`~mtrl.plugins.batch_env.BatchEnv` with numpy-batched dynamics instead.
    """
    vec = SyncVectorEnv([env_fn for _ in range(num_envs)], autoreset_mode=AutoresetMode.NEXT_STEP)
    return GymVectorBatchEnv(vec, seed=seed)


def batch_env_from_pettingzoo(
    env_fn: Callable[[], Any], num_envs: int, seed: int = 0, env_id: str = "pettingzoo"
) -> BatchEnv:
    """``num_envs`` agent slots over pettingzoo parallel-API games built by ``env_fn``.

    Slot ``g * n + j`` is agent ``possible_agents[j]`` of game ``g`` (``num_envs`` must be a
    multiple of the agent count ``n``); all agents must share one observation and one action
    space. A game ends for all its slots at once: agents pettingzoo marks terminated report
    ``terminated``, the others ``truncated``; the next step is the game's reset step. Game ``g``
    first resets with ``seed + g``. ``env_id`` names the env in errors.
    """
    from mtrl.plugins.pettingzoo_slots import ParallelSlotsBatchEnv

    return ParallelSlotsBatchEnv(env_fn, num_envs, seed, env_id)
