"""Building a task's batch env from its config: numpy envs for actors, tensor envs for Anakin."""

from __future__ import annotations

import gymnasium as gym
import torch

from mtrl.config import ExperimentConfig
from mtrl.errors import EnvKwargsError, UserError
from mtrl.plugins import BatchEnv, EnvSpec


def build_env(spec: EnvSpec, cfg: ExperimentConfig, i: int, num_envs: int, seed: int) -> BatchEnv:
    task = cfg.tasks[i]
    try:
        return spec.build(num_envs, seed, **task.env_kwargs)
    except EnvKwargsError as e:
        raise EnvKwargsError(f"tasks[{i}].env_kwargs: {e}") from e


def task_spaces(
    spec: EnvSpec, cfg: ExperimentConfig, i: int, env: BatchEnv | None
) -> tuple[gym.Space, gym.Space]:
    """Task ``i``'s (observation, action) spaces: from its env when one was built, else from
    the spec (building one copy only when its kwargs may change the spaces)."""
    if env is not None:
        return env.single_observation_space, env.single_action_space
    if not cfg.tasks[i].env_kwargs:
        return spec.observation_space, spec.action_space
    probe = build_env(spec, cfg, i, 1, cfg.task_seed(i))
    try:
        return probe.single_observation_space, probe.single_action_space
    finally:
        probe.close()


def build_anakin_env(
    spec: EnvSpec, cfg: ExperimentConfig, i: int, seed: int, device: torch.device
) -> BatchEnv:
    """Task ``i``'s tensor-native env on the learner's device (Anakin)."""
    task = cfg.tasks[i]
    kwargs = {**task.env_kwargs, "device": str(device)}
    try:
        env = spec.build(task.num_envs, seed, **kwargs)
    except (EnvKwargsError, TypeError) as e:
        raise UserError(
            f"tasks[{i}] ({task.env}): anakin needs a tensor-native env that takes a `device` "
            f"(e.g. tensor/CartPole-v1; `mtrl envs --plugin tensor`): {e}"
        ) from e
    if not hasattr(env, "step_tensor"):
        env.close()
        raise UserError(
            f"tasks[{i}] ({task.env}): anakin needs a tensor-native env "
            "(e.g. tensor/CartPole-v1; `mtrl envs --plugin tensor`)"
        )
    return env
