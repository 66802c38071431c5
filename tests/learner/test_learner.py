"""The learner's update: PopArt wiring, masking of reset steps, and a mixed-task batch."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from mtrl.config import LearnerConfig
from mtrl.learner.batch import TaskBatch
from mtrl.learner.learner import Learner
from mtrl.learner.model import MultiTaskModel, TaskSpaces

T, N = 6, 4
SPACES = [
    TaskSpaces(gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2)),
    TaskSpaces(gym.spaces.Box(-1, 1, (5,), np.float32), gym.spaces.Box(-2, 2, (2,), np.float32)),
]


def _batch(task: int, reward_scale: float, seed: int) -> TaskBatch:
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


def _learner(**kw: object) -> Learner:
    torch.manual_seed(0)
    cfg = LearnerConfig.model_validate({"model": {"encoder_dim": 16, "torso": [16]}, **kw})
    return Learner(MultiTaskModel(SPACES, cfg.model), cfg, ["a", "b"])


def _unnormalised_values(learner: Learner, batches: list[TaskBatch]) -> list[torch.Tensor]:
    out = []
    with torch.no_grad():
        for b in batches:
            h = learner.model.embed(b.task, b.obs)
            n = h @ learner.model.value_weight[b.task] + learner.model.value_bias[b.task]
            out.append(n.double() * learner.sigma[b.task] + learner.mu[b.task])
    return out


def test_popart_moves_statistics_and_preserves_outputs_exactly() -> None:
    learner = _learner(learning_rate=1e-12, popart={"beta": 0.5})
    batches = [_batch(0, 1.0, 1), _batch(1, 1000.0, 2)]
    before = _unnormalised_values(learner, batches)
    learner.update(batches)
    after = _unnormalised_values(learner, batches)
    assert learner.sigma[1] > 50 * learner.sigma[0]  # the 1000x-reward task got a larger scale
    for b, a in zip(before, after, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_without_popart_statistics_stay_put() -> None:
    learner = _learner(popart={"enabled": False})
    metrics = learner.update([_batch(0, 1.0, 1), _batch(1, 1000.0, 2)])
    assert float(learner.mu.abs().sum()) == 0.0
    assert not any(k.startswith("popart/") for k in metrics)


def test_update_counts_only_valid_steps_and_reports_lag() -> None:
    learner = _learner()
    batches = [_batch(0, 1.0, 1), _batch(1, 1.0, 2)]
    metrics = learner.update(batches)
    assert metrics["charts/learner_samples"] == sum(b.num_samples for b in batches)
    assert metrics["charts/policy_lag"] == 0
    metrics = learner.update(batches)  # same (now one version old) data
    assert metrics["charts/policy_lag"] == 1
    assert learner.version == 2


@pytest.mark.parametrize("end", ["terminated", "truncated"])
def test_reset_steps_do_not_affect_the_gradient(end: str) -> None:
    """An episode ends at t=1 in column 1, so t=2 is a reset step: its reward must not leak."""
    b = _batch(0, 1.0, 3)
    grads = []
    for poison in (0.0, 1e6):
        learner = _learner(learning_rate=1e-3)
        bb = TaskBatch(**{**b.__dict__})
        bb.terminated = torch.zeros_like(b.terminated)
        bb.truncated = torch.zeros_like(b.truncated)
        getattr(bb, end)[1, 1] = True
        bb.valid = torch.ones_like(b.valid)
        bb.valid[2, 1] = False
        bb.rewards = b.rewards.clone()
        bb.rewards[2, 1] = poison
        learner.update([bb])
        grads.append(torch.cat([p.detach().flatten() for p in learner.model.parameters()]))
    torch.testing.assert_close(grads[0], grads[1])


@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
def test_both_optimisers_step(optimizer: str) -> None:
    learner = _learner(optimizer=optimizer)
    before = [p.detach().clone() for p in learner.model.parameters()]
    learner.update([_batch(0, 1.0, 1)])
    assert any(
        not torch.equal(a, p) for a, p in zip(before, learner.model.parameters(), strict=True)
    )
