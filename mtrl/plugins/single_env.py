"""One copy of a registered mtrl env as a plain ``gymnasium.Env``: what a library that steps one
env at a time (Stable-Baselines3, a notebook, gymnasium's env checker) needs to run any mtrl
env id, the contrib simulations included.

The reverse of :func:`mtrl.plugins.batch_env_from_gymnasium`. The batch env's next-step
auto-reset is hidden: an episode ends with ``terminated`` or ``truncated`` as gymnasium's
contract says, and the caller's ``reset()`` starts the next one (the batch env is reset, not
stepped). ``reset(seed=s)`` rebuilds the copy with seed ``s`` (mtrl envs are seeded at
construction); ``info["success"]`` carries the env's success flag where it has one.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from mtrl.plugins.batch_env import BatchEnv
from mtrl.plugins.manager import get_plugins

__all__ = ["SingleCopyEnv"]


class SingleCopyEnv(gym.Env):
    """``env_id`` (any id in the plugin registry) with one copy, stepped as a gymnasium env."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, env_id: str, seed: int = 0, **env_kwargs: Any) -> None:
        super().__init__()
        self.env_id, self.env_kwargs = env_id, env_kwargs
        self._batch = self._build(seed)
        self.observation_space = self._batch.single_observation_space
        self.action_space = self._batch.single_action_space

    def _build(self, seed: int) -> BatchEnv:
        return get_plugins().envs.get(self.env_id).build(num_envs=1, seed=seed, **self.env_kwargs)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._batch.close()
            self._batch = self._build(int(seed))
        return _first(self._batch.reset()), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        out = self._batch.step(np.asarray(action)[None])
        info: dict[str, Any] = {}
        if out.success is not None:
            info["success"] = bool(out.success[0])
        return (
            _first(out.obs),
            float(out.reward[0]),
            bool(out.terminated[0]),
            bool(out.truncated[0]),
            info,
        )

    def close(self) -> None:
        self._batch.close()


def _first(obs: Any) -> Any:
    """Copy 0 of a batch of observations (a dict's arrays alike)."""
    if isinstance(obs, dict):
        return {k: _first(v) for k, v in obs.items()}
    return np.asarray(obs)[0]
