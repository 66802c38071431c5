"""Random unrolls of two tasks, one discrete and one continuous, for the tests of learner
updates (IMPALA's own, its torsos, the combined task gradients): one place, so that the
learner tests of several directories draw the same batches."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import TaskSpaces

T, N = 6, 4
"""Steps and env columns of every batch."""

SPACES = [
    TaskSpaces(gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2)),
    TaskSpaces(gym.spaces.Box(-1, 1, (5,), np.float32), gym.spaces.Box(-2, 2, (2,), np.float32)),
]


def two_task_batch(task: int, reward_scale: float, seed: int) -> TaskBatch:
    """Task ``task``'s random unroll (rewards times ``reward_scale``), the same for a seed."""
    g = torch.Generator().manual_seed(seed)
    obs_dim = SPACES[task].observation_space.shape[0]
    if task == 0:
        actions = torch.randint(0, 2, (T, N), generator=g)
    else:
        actions = torch.randn(T, N, 2, generator=g)
    term = torch.rand(T, N, generator=g) < 0.1
    valid = torch.ones(T, N, dtype=torch.bool)
    valid[1:] &= ~term[:-1]
    return TaskBatch(
        task=task,
        obs=torch.randn(T + 1, N, obs_dim, generator=g),
        actions=actions,
        behaviour_logp=-torch.rand(T, N, generator=g),
        rewards=reward_scale * torch.randn(T, N, generator=g),
        terminated=term,
        truncated=torch.zeros(T, N, dtype=torch.bool),
        valid=valid,
        policy_version=0,
    )
