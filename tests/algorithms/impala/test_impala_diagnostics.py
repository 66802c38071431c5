"""Per-task learning diagnostics against hand-computed values, and in a real update."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from mtrl.algorithms.impala import diagnostics
from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.config import LearnerConfig
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel, TaskSpaces


def _sums(**over):
    t, n = 2, 2
    args = dict(
        valid=torch.tensor([[True, True], [True, False]]),
        entropy=torch.tensor([[1.0, 2.0], [3.0, 100.0]]),
        behaviour_logp=torch.zeros(t, n),
        target_logp=torch.log(torch.tensor([[1.0, 2.0], [0.5, 9.0]])),
        advantages=torch.tensor([[-1.0, 2.0], [3.0, 50.0]]),
        value=torch.tensor([[0.0, 1.0], [2.0, 0.0]]),
        target=torch.tensor([[1.0, 1.0], [4.0, 7.0]]),
        rho_bar=1.0,
    )
    args.update(over)
    return diagnostics.task_sums(**args)


def test_task_means_by_hand() -> None:
    out = diagnostics.task_means(_sums(), gaussian=False)
    r = np.array([1.0, 2.0, 0.5])  # the invalid step (ratio 9) is left out everywhere
    assert out["entropy"] == pytest.approx(2.0)
    assert out["kl"] == pytest.approx(np.mean((r - 1) - np.log(r)))
    assert out["rho"] == pytest.approx(r.mean())
    assert out["rho_clipped"] == pytest.approx(1 / 3)  # only 2.0 exceeds ρ̄ = 1 (1.0 is not)
    assert out["adv_abs"] == pytest.approx(2.0)
    mse = (1 + 0 + 4) / 3
    var = np.var([1.0, 1.0, 4.0])
    assert out["value_error"] == pytest.approx(mse)
    assert out["value_ev"] == pytest.approx(1 - mse / var)
    assert "log_std" not in out and "saturated" not in out


def test_gaussian_saturation_and_log_std() -> None:
    mean = torch.tensor([[[0.0, 3.0], [-2.5, 5.0]], [[1.0, 0.0], [9.0, 9.0]]])
    log_std = torch.tensor([-1.0, 0.0])
    out = diagnostics.task_means(_sums(mean=mean, log_std=log_std), gaussian=True)
    assert out["saturated"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert out["log_std"] == pytest.approx(-0.5)
    # Only the dims the env squashes count: the second dim unbounded (NaN half-width).
    only_first = torch.tensor([0.0, math.nan])
    out = diagnostics.task_means(
        _sums(mean=mean, log_std=log_std, squashed=only_first), gaussian=True
    )
    assert out["saturated"] == pytest.approx((0.0 + 1.0 + 0.0) / 3)
    none = torch.tensor([math.nan, math.nan])
    out = diagnostics.task_means(_sums(mean=mean, log_std=log_std, squashed=none), gaussian=True)
    assert out["saturated"] == 0.0


def test_no_valid_step_gives_nothing_and_sums_add() -> None:
    empty = _sums(valid=torch.zeros(2, 2, dtype=torch.bool))
    assert diagnostics.task_means(empty, gaussian=False) == {}
    both = diagnostics.task_means(_sums() + _sums(), gaussian=False)
    assert both["kl"] == pytest.approx(diagnostics.task_means(_sums(), gaussian=False)["kl"])


def test_grad_shares_follow_the_gradient_norms() -> None:
    w = nn.Parameter(torch.tensor([1.0, 2.0]))
    x = w * 1.0
    losses = [3.0 * x.sum(), 1.0 * x.sum(), torch.tensor(5.0, requires_grad=True)]
    shares = diagnostics.grad_shares(losses, [w])
    assert shares == pytest.approx([0.75, 0.25, 0.0])
    losses[0].backward()  # the graph is kept for the caller's own backward
    assert w.grad is not None


def _batch(task: int, t: int = 5, n: int = 3, obs_dim: int = 4, box: bool = False) -> TaskBatch:
    g = torch.Generator().manual_seed(task)
    actions = torch.randn(t, n, 1, generator=g) if box else torch.randint(0, 2, (t, n))
    return TaskBatch(
        task=task,
        obs=torch.randn(t + 1, n, obs_dim, generator=g),
        actions=actions,
        behaviour_logp=-torch.rand(t, n, generator=g),
        rewards=torch.randn(t, n, generator=g),
        terminated=torch.zeros(t, n, dtype=torch.bool),
        truncated=torch.zeros(t, n, dtype=torch.bool),
        valid=torch.ones(t, n, dtype=torch.bool),
        policy_version=0,
    )


def test_learner_logs_every_task_and_windows_them() -> None:
    obs = spaces.Box(-1, 1, (4,))
    tasks = [TaskSpaces(obs, spaces.Discrete(2)), TaskSpaces(obs, spaces.Box(-1, 1, (1,)))]
    cfg = LearnerConfig(diagnostics_every=1)
    learner = ImpalaLearner(MultiTaskModel(tasks, cfg.model), cfg, ["a", "b"])
    metrics = learner.update([_batch(0), _batch(1, box=True)])
    for name in ("a", "b"):
        for key in ("entropy", "kl", "rho", "value_error", "torso_grad_share"):
            assert math.isfinite(metrics[f"learner/{name}/{key}"]), key
    assert "learner/b/saturated" in metrics and "learner/a/saturated" not in metrics
    shares = metrics["learner/a/torso_grad_share"] + metrics["learner/b/torso_grad_share"]
    assert shares == pytest.approx(1.0)
    learner.update([_batch(0)])  # task b absent from the second update
    window = learner.pop_diagnostics()
    assert window["learner/b/torso_grad_share"] == pytest.approx(
        metrics["learner/b/torso_grad_share"] / 2
    )
    assert learner.pop_diagnostics() == {}  # a new, empty window


def test_a_model_without_torso_parameters_skips_the_torso_share() -> None:
    """``torso: []`` (heads straight on the encoders) has no torso gradient to share out."""
    assert diagnostics.grad_shares([torch.tensor(1.0, requires_grad=True)], []) == [0.0]
    obs = spaces.Box(-1, 1, (4,))
    cfg = LearnerConfig(diagnostics_every=1, model={"torso": []})
    learner = ImpalaLearner(
        MultiTaskModel([TaskSpaces(obs, spaces.Discrete(2))], cfg.model), cfg, ["a"]
    )
    metrics = learner.update([_batch(0)])
    assert math.isfinite(metrics["learner/a/entropy"])
    assert "learner/a/torso_grad_share" not in metrics
