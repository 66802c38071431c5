"""mtrl's plugin system: the public API for environment plugins.

Everything a plugin author needs is importable from here::

    from mtrl.plugins import hookimpl, BatchEnv, StepBatch, batch_env_from_gymnasium
"""

from mtrl.errors import PluginUnavailable
from mtrl.plugins.adapters import (
    GymVectorBatchEnv,
    batch_env_from_gymnasium,
    batch_env_from_pettingzoo,
)
from mtrl.plugins.batch_env import AsyncBatchEnv, BatchEnv, StepBatch
from mtrl.plugins.hookspecs import hookimpl
from mtrl.plugins.manager import Plugins, get_plugins, load_plugins, reset_plugins
from mtrl.plugins.registrar import EnvRegistrar
from mtrl.plugins.single_env import SingleCopyEnv
from mtrl.plugins.spec import EnvRegistry, EnvSpec


def make_env(env_id: str, num_envs: int, seed: int = 0, **env_kwargs: object) -> BatchEnv:
    """Build a batch env by id from the process-wide registry (safe in spawned workers)."""
    return get_plugins().envs.get(env_id).build(num_envs=num_envs, seed=seed, **env_kwargs)


__all__ = [
    "AsyncBatchEnv",
    "BatchEnv",
    "EnvRegistrar",
    "EnvRegistry",
    "EnvSpec",
    "GymVectorBatchEnv",
    "PluginUnavailable",
    "Plugins",
    "SingleCopyEnv",
    "StepBatch",
    "batch_env_from_gymnasium",
    "batch_env_from_pettingzoo",
    "get_plugins",
    "hookimpl",
    "load_plugins",
    "make_env",
    "reset_plugins",
]
