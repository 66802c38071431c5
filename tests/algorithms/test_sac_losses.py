"""SAC's pure pieces against hand-computed values: the losses, the squashed log-density, the
replay ratio's carry and the per-task split of a batch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mtrl.algorithms.sac import losses
from mtrl.algorithms.sac.sampling import ReplayRatio, TaskMix

LOG2 = math.log(2.0)


def t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_squashed_log_prob_subtracts_the_tanh_and_bound_jacobians() -> None:
    # u = 0: tanh' = 1, so only log((high - low) / 2) = log 2 comes off; u = 0.5: also
    # log(1 - tanh(0.5)^2) = log(0.786448) = -0.240229.
    u = t(0.0, 0.5).reshape(2, 1)
    got = losses.squashed_log_prob(t(-1.0, -2.0), u, torch.tensor([LOG2]))
    assert got.tolist() == pytest.approx([-1.0 - LOG2, -2.0 + 0.240229 - LOG2], abs=1e-6)


def test_squashed_density_integrates_to_one_over_the_bounds() -> None:
    # Box [-2, 3]: a = -2 + (tanh(u) + 1) * 2.5. The density of a, from N(0.4, 0.7^2) over u,
    # integrated over a on a fine grid, is 1.
    low, high, mean, std = -2.0, 3.0, 0.4, 0.7
    a = torch.linspace(low, high, 200_001, dtype=torch.float64)[1:-1]
    u = torch.atanh((a - low) / ((high - low) / 2) - 1).unsqueeze(-1)
    raw = torch.distributions.Normal(mean, std).log_prob(u).squeeze(-1)
    lhw = torch.tensor([math.log((high - low) / 2)], dtype=torch.float64)
    density = losses.squashed_log_prob(raw, u, lhw).exp()
    assert torch.trapezoid(density, a).item() == pytest.approx(1.0, abs=1e-4)


def test_soft_target_bootstraps_unless_terminated() -> None:
    y = losses.soft_target(t(1.0, 2.0), torch.tensor([False, True]), 0.9, t(10.0, 10.0))
    assert y.tolist() == pytest.approx([1.0 + 0.9 * 10.0, 2.0])


def test_continuous_next_value_is_the_clipped_double_q_minus_alpha_logp() -> None:
    v = losses.continuous_next_value(t(1.0, 3.0), t(2.0, 1.0), t(-1.0, 0.5), t(0.2, 0.2))
    assert v.tolist() == pytest.approx([1.0 + 0.2, 1.0 - 0.1])


def test_discrete_next_value_is_the_expectation_over_the_policy() -> None:
    # min Q = [1, 3]; with alpha 0.5: 0.25 (1 - 0.5 log .25) + 0.75 (3 - 0.5 log .75)
    # = 0.25 * 1.693147 + 0.75 * 3.143841 = 2.781168
    log_probs = torch.log(t(0.25, 0.75)).unsqueeze(0)
    v = losses.discrete_next_value(t(1.0, 4.0)[None], t(2.0, 3.0)[None], log_probs, t(0.5))
    assert v.item() == pytest.approx(2.781168, abs=1e-6)


def test_critic_loss_weights_each_sample_and_holds_the_target() -> None:
    y = t(1.0, 1.0).requires_grad_()
    q1 = t(1.0, 2.0).requires_grad_()
    loss = losses.critic_loss(q1, t(0.0, 2.0), y, t(1.0, 0.5))
    assert loss.tolist() == pytest.approx([0.0 + 1.0, 0.5 * (1.0 + 1.0)])
    loss.sum().backward()
    assert y.grad is None and q1.grad.tolist() == pytest.approx([0.0, 0.5 * 2 * 1.0])


def test_continuous_actor_loss_moves_the_policy_not_alpha() -> None:
    alpha = t(0.1).requires_grad_()
    logp = t(-1.0).requires_grad_()
    loss = losses.continuous_actor_loss(logp, t(2.0), t(3.0), alpha)
    assert loss.item() == pytest.approx(-0.1 - 2.0)
    loss.backward()
    assert alpha.grad is None and logp.grad.item() == pytest.approx(0.1)


def test_discrete_actor_loss_is_the_expectation_and_holds_q() -> None:
    # pi = [.5, .5], min Q = [1, 0], alpha 1: .5 (log .5 - 1) + .5 (log .5 - 0) = -1.193147
    logits = torch.zeros(1, 2, dtype=torch.float64, requires_grad=True)
    q1 = t(1.0, 2.0)[None].requires_grad_()
    loss = losses.discrete_actor_loss(logits.log_softmax(-1), q1, t(1.0, 0.0)[None], t(1.0))
    assert loss.item() == pytest.approx(-1.193147, abs=1e-6)
    loss.backward()
    assert q1.grad is None
    # d/dz of sum p (log p - q) at the uniform policy: p_i (q_j-difference) / 2 terms.
    assert logits.grad.tolist()[0] == pytest.approx([-0.25, 0.25])


def test_discrete_entropy_and_temperature_loss() -> None:
    h = losses.discrete_entropy(torch.log(t(0.5, 0.5))[None])
    assert h.item() == pytest.approx(LOG2)
    log_alpha = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    loss = losses.temperature_loss(log_alpha, t(1.0), 0.5)
    assert loss.item() == pytest.approx(0.15)
    loss.sum().backward()
    assert log_alpha.grad.item() == pytest.approx(0.5)  # entropy above target: alpha falls


def test_replay_ratio_carries_the_fraction() -> None:
    ratio = ReplayRatio(10.0, 32)  # 10/32 gradient steps per env step
    assert [ratio.steps(24) for _ in range(4)] == [7, 8, 7, 8]  # 7.5 each
    assert ratio.carry == pytest.approx(0.0)
    assert ratio.steps(1) == 0 and ratio.carry == pytest.approx(10 / 32)


def test_task_mix_follows_weighted_data_and_splits_exactly_in_expectation() -> None:
    mix = TaskMix(3, decay=0.5)
    assert mix.shares([0, 2]).tolist() == [0.5, 0.5]  # no data yet: equal
    mix.observe({0: 100.0, 1: 300.0})
    mix.observe({0: 100.0 * 3.0})  # loss weight 3 on task 0's next unroll
    assert mix.weighted.tolist() == pytest.approx([350.0, 150.0, 0.0])
    assert mix.shares([0, 1]).tolist() == pytest.approx([0.7, 0.3])
    rng = np.random.default_rng(0)
    splits = np.array([mix.split(9, [0, 1], rng) for _ in range(20_000)])
    assert (splits.sum(1) == 9).all()
    assert set(splits[:, 0]) == {6, 7}  # floor(6.3) or one more
    assert splits.mean(0) == pytest.approx([6.3, 2.7], abs=0.02)
