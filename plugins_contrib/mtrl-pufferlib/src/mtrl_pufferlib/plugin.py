"""The mtrl plugin: ``pufferlib/<name>`` for the Ocean envs listed in :data:`OCEAN`.

Spaces come from the table (building an Ocean env at registration would import PufferLib on
every ``mtrl`` start); PufferLib is imported when an env is built. Without PufferLib's Ocean
envs installed the plugin is listed as unavailable.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from mtrl.errors import PluginUnavailable
from mtrl.plugins import BatchEnv, EnvRegistrar, hookimpl


@dataclass(frozen=True)
class Ocean:
    """One Ocean env as mtrl offers it."""

    observation_space: gym.Space
    action_space: gym.Space
    max_episode_steps: int | None
    """The C env's own step limit (it resets there without a truncation flag)."""
    description: str
    random_score: float | None = None


OCEAN: dict[str, Ocean] = {
    "cartpole": Ocean(
        gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
        gym.spaces.Discrete(2),
        200,  # MAX_STEPS in pufferlib/ocean/cartpole/cartpole.h
        "PufferLib's CartPole in C: 4 floats, 2 actions, reward 1 a step (0 on the last), "
        "200 steps",
    ),
}


def make_ocean(num_envs: int, seed: int = 0, *, name: str, **kwargs: Any) -> BatchEnv:
    """Build ``num_envs`` copies of Ocean env ``name``; ``kwargs`` go to its constructor."""
    from mtrl_pufferlib.env import OceanBatchEnv

    kwargs.setdefault("max_episode_steps", OCEAN[name].max_episode_steps)
    return OceanBatchEnv(name, num_envs, seed, **kwargs)


@hookimpl
def mtrl_register_envs(register: EnvRegistrar) -> None:
    """Offer ``pufferlib/<name>`` for each env of :data:`OCEAN`."""
    if importlib.util.find_spec("pufferlib.ocean.environment") is None:
        raise PluginUnavailable(
            "PufferLib's Ocean envs are not installed: build pufferlib 3.0.0 from its sdist "
            "(benchmarks/peers/venvs.py pufferlib_ocean)"
        )
    for name, ocean in sorted(OCEAN.items()):
        register.env(
            name,
            partial(make_ocean, name=name),
            observation_space=ocean.observation_space,
            action_space=ocean.action_space,
            description=ocean.description,
            stochastic=True,
            random_score=ocean.random_score,
            reference_score=None,
            max_episode_steps=ocean.max_episode_steps,
        )
