"""One Meta-World task as a gymnasium env: a new goal from the task's 50 on every reset, float32
observations, ``info["success"]`` passed on (mtrl counts an episode as a success if any of
its steps is), and optionally the task's one-hot id appended to the observation.

Meta-World's own MT1/MT10 makers wrap the same pieces (task sampling, time limit, one-hot); this
module builds them from Meta-World's public objects (``MT1(name, seed).train_classes`` and
``.train_tasks``, ``env.set_task``) so that mtrl sees exactly one task per env id, seeded per
copy by mtrl's batch-env rule.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from mtrl_metaworld.tasks import MAX_PATH_LENGTH


@lru_cache(maxsize=64)
def goal_tasks(name: str, goals_seed: int) -> tuple[type, tuple[Any, ...]]:
    """The env class of task ``name`` and its 50 goals (Meta-World ``Task`` objects), made by
    Meta-World from ``goals_seed``: every copy and every process sees the same 50."""
    import metaworld

    bench = metaworld.MT1(name, seed=goals_seed)
    return bench.train_classes[name], tuple(bench.train_tasks)


class MetaWorldTask(gym.Env):
    """Meta-World task ``name`` with goal sampling on reset (see the module docstring).

    ``one_hot``: ``(index, size)`` appends a one-hot task id of ``size`` with a 1 at ``index``
    (Meta-World's ``use_one_hot``); ``None`` leaves the 39 observation floats as they are.
    ``max_episode_steps``: at most the benchmark's 500; the episode is truncated there.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        name: str,
        goals_seed: int = 0,
        max_episode_steps: int = MAX_PATH_LENGTH,
        one_hot: tuple[int, int] | None = None,
    ) -> None:
        if not 1 <= max_episode_steps <= MAX_PATH_LENGTH:
            raise ValueError(
                f"max_episode_steps must be 1..{MAX_PATH_LENGTH} (Meta-World's path length), "
                f"got {max_episode_steps}"
            )
        cls, self._tasks = goal_tasks(name, goals_seed)
        self._env = cls(reward_function_version="v2")
        self._env.set_task(self._tasks[0])  # goals visible, as in Meta-World's MT benchmarks
        self._horizon = max_episode_steps
        self._t = 0
        self._rng = np.random.default_rng()
        space = self._env.sawyer_observation_space
        low, high = space.low.astype(np.float32), space.high.astype(np.float32)
        self._one_hot = np.zeros(0, np.float32)
        if one_hot is not None:
            index, size = one_hot
            if not 0 <= index < size:
                raise ValueError(f"one_hot index {index} is not in 0..{size - 1}")
            self._one_hot = np.eye(size, dtype=np.float32)[index]
            low = np.concatenate([low, np.zeros(size, np.float32)])
            high = np.concatenate([high, np.ones(size, np.float32)])
        self.observation_space = gym.spaces.Box(low, high, dtype=np.float32)
        act = self._env.action_space
        self.action_space = gym.spaces.Box(
            act.low.astype(np.float32), act.high.astype(np.float32), dtype=np.float32
        )

    def _obs(self, obs: np.ndarray) -> np.ndarray:
        return np.concatenate([np.asarray(obs, np.float32), self._one_hot])

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            self._env.seed(seed)
        self._env.set_task(self._tasks[int(self._rng.integers(len(self._tasks)))])
        obs, _ = self._env.reset()
        self._t = 0
        return self._obs(obs), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self._env.step(np.asarray(action, np.float64))
        self._t += 1
        truncated = bool(truncated) or self._t >= self._horizon
        return (
            self._obs(obs),
            float(reward),
            bool(terminated),
            truncated,
            {"success": bool(info["success"])},
        )

    def close(self) -> None:
        self._env.close()
