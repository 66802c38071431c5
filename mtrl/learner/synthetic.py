"""Random but valid :class:`TaskBatch` objects for any task's spaces, without envs.

For tests and learner benchmarks: observations and actions lie in the task's spaces (integer
frames stay ``uint8``, masked actions are legal), episodes end at random with ``terminated``
and ``truncated`` kept apart, and the step after an end is marked invalid (a reset step), as
actors write them. Everything is drawn from a seeded ``torch.Generator``, so every process
that asks for the same seed gets the same batch.
"""

from __future__ import annotations

import itertools
import math

import gymnasium as gym
import torch
from gymnasium import spaces

from mtrl.learner.batch import Obs, TaskBatch
from mtrl.learner.encoders import ACTION_MASK_KEY
from mtrl.learner.model import TaskSpaces

__all__ = ["random_obs", "random_task_batch", "split_columns"]


def _integers(low: int, high: int, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    return torch.randint(low, high, shape, generator=g)


def random_obs(space: gym.Space, shape: tuple[int, ...], g: torch.Generator) -> Obs:
    """Observations of ``space`` with leading ``shape``, in the dtype the env would use."""
    if isinstance(space, spaces.Dict):
        out = {}
        for key, sub in space.spaces.items():
            if key == ACTION_MASK_KEY:
                mask = torch.rand(*shape, *sub.shape, generator=g) < 0.7
                mask[..., 0] = True  # at least one legal action
                out[key] = mask.to(torch.int8)
            else:
                out[key] = random_obs(sub, shape, g)
        return out
    if isinstance(space, spaces.Discrete):
        return _integers(int(space.start), int(space.start + space.n), shape, g)
    if isinstance(space, spaces.Box):
        full = (*shape, *space.shape)
        if space.dtype is not None and space.dtype.kind in "ui":
            return _integers(int(space.low.min()), int(space.high.max()) + 1, full, g).to(
                torch.uint8 if space.dtype.itemsize == 1 else torch.int64
            )
        return torch.randn(full, generator=g)
    raise TypeError(f"random_obs: unsupported observation space {space!r}")


def _random_actions(
    space: gym.Space, shape: tuple[int, ...], mask: torch.Tensor | None, g: torch.Generator
) -> torch.Tensor:
    if isinstance(space, spaces.Discrete):
        if mask is not None:
            probs = mask.reshape(-1, mask.shape[-1]).float()
            return torch.multinomial(probs, 1, generator=g).reshape(shape)
        return _integers(0, int(space.n), shape, g)
    if isinstance(space, spaces.MultiDiscrete):
        cols = [_integers(0, int(n), shape, g) for n in space.nvec.reshape(-1)]
        return torch.stack(cols, -1).reshape(*shape, *space.shape)
    if isinstance(space, spaces.Box):
        return torch.randn(*shape, *space.shape, generator=g)
    raise TypeError(f"random_task_batch: unsupported action space {space!r}")


def random_task_batch(
    task: int,
    task_spaces: TaskSpaces,
    unroll_length: int,
    num_envs: int,
    *,
    seed: int,
    reward_scale: float = 1.0,
    end_prob: float = 0.1,
    policy_version: int = 0,
    state_size: int = 0,
) -> TaskBatch:
    """A ``T x N`` unroll block of task ``task`` on the CPU (move it with ``.to`` helpers);
    with ``state_size > 0`` it carries random initial core states ``[N, state_size]`` (drawn
    after everything else, so the other fields do not depend on it)."""
    g = torch.Generator().manual_seed(seed)
    t, n = unroll_length, num_envs
    obs = random_obs(task_spaces.observation_space, (t + 1, n), g)
    mask = obs.get(ACTION_MASK_KEY) if isinstance(obs, dict) else None
    actions = _random_actions(
        task_spaces.action_space, (t, n), None if mask is None else mask[:-1], g
    )
    ends = torch.rand(t, n, generator=g) < end_prob
    truncated = ends & (torch.rand(t, n, generator=g) < 0.3)
    terminated = ends & ~truncated
    valid = torch.ones(t, n, dtype=torch.bool)
    valid[1:] &= ~ends[:-1]  # the step after an episode end is a reset step
    behaviour_logp = -torch.rand(t, n, generator=g) * math.log(4.0)
    rewards = reward_scale * torch.randn(t, n, generator=g)
    state = torch.randn(n, state_size, generator=g) * 0.5 if state_size else None
    return TaskBatch(
        task=task,
        obs=obs,
        actions=actions,
        behaviour_logp=behaviour_logp,
        rewards=rewards,
        terminated=terminated,
        truncated=truncated,
        valid=valid,
        policy_version=policy_version,
        core_state=state,
    )


def _columns(x: Obs, sl: slice) -> Obs:
    if isinstance(x, dict):
        return {k: v[:, sl] for k, v in x.items()}
    return x[:, sl]


def split_columns(batch: TaskBatch, parts: int) -> list[TaskBatch]:
    """Split a batch's env columns into ``parts`` nearly equal batches (time stays whole)."""
    n = batch.valid.shape[1]
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    out = []
    for lo, hi in itertools.pairwise(bounds):
        sl = slice(lo, hi)
        out.append(
            TaskBatch(
                task=batch.task,
                obs=_columns(batch.obs, sl),
                actions=batch.actions[:, sl],
                behaviour_logp=batch.behaviour_logp[:, sl],
                rewards=batch.rewards[:, sl],
                terminated=batch.terminated[:, sl],
                truncated=batch.truncated[:, sl],
                valid=batch.valid[:, sl],
                policy_version=batch.policy_version,
                core_state=None if batch.core_state is None else batch.core_state[sl],
            )
        )
    return out
