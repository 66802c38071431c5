"""Built-in plugin ``tensor``: classic-control envs written in torch tensors, for Anakin.

Ids: ``tensor/CartPole-v1``, ``tensor/Acrobot-v1``, ``tensor/Pendulum-v1``,
``tensor/MountainCar-v0``, ``tensor/MountainCarContinuous-v0``. Each reproduces gymnasium's
dynamics, spaces, rewards, termination, time limit and start-state ranges (the parity tests in
``tests/plugins/test_tensor_envs.py`` step both from identical states); only the random numbers
of start states differ (a ``torch.Generator`` seeded with ``seed``).

The envs are :class:`~mtrl.plugins.builtin.tensor_envs.base.TensorBatchEnv`: the numpy
``BatchEnv`` API for Sebulba actors, and a tensor API (``reset_tensor``/``step_tensor``) that
keeps everything on the device for Anakin (:mod:`mtrl.anakin`). ``env_kwargs``: ``device``
(default ``"cpu"``), ``dtype`` (``"float32"`` default, or ``"float64"``), ``max_episode_steps``,
``compile`` (``torch.compile`` the step; off by default). torch is imported only when an env
is built, so listing plugins stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from mtrl.plugins import hookimpl
from mtrl.plugins.batch_env import BatchEnv
from mtrl.plugins.builtin.scores import CLASSIC_RANDOM_SOLVED
from mtrl.plugins.builtin.tensor_envs.spaces import env_spaces

#: env name -> (module, class, max_episode_steps)
ENVS: dict[str, tuple[str, str, int]] = {
    "CartPole-v1": ("cartpole", "CartPole", 500),
    "Acrobot-v1": ("acrobot", "Acrobot", 500),
    "Pendulum-v1": ("pendulum", "Pendulum", 200),
    "MountainCar-v0": ("mountain_car", "MountainCar", 200),
    "MountainCarContinuous-v0": ("mountain_car", "MountainCarContinuous", 999),
}


def env_class(name: str) -> type:
    """The :class:`TensorBatchEnv` subclass of env ``name`` (e.g. ``"CartPole-v1"``)."""
    module, cls, _ = ENVS[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


class _Factory:
    """``make(num_envs, seed, **env_kwargs)`` for one env name; picklable for spawned workers."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, num_envs: int, seed: int = 0, **env_kwargs: Any) -> BatchEnv:
        return env_class(self.name)(num_envs, seed, **env_kwargs)

    def __repr__(self) -> str:
        return f"tensor_envs.make[{self.name}]"


@hookimpl
def mtrl_register_envs(register: Any) -> None:
    """Offer the five classic-control tensor envs, spaces declared (building one imports torch)."""
    for name, (_, _, max_steps) in ENVS.items():
        random_score, reference_score = CLASSIC_RANDOM_SOLVED[name]
        observation_space, action_space = env_spaces(name)
        register.env(
            name,
            _Factory(name),
            observation_space=observation_space,
            action_space=action_space,
            description=f"gymnasium {name} dynamics in torch tensors (Anakin-ready)",
            stochastic=False,
            random_score=random_score,
            reference_score=reference_score,
            max_episode_steps=max_steps,
        )
