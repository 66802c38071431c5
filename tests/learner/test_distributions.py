"""Tests for mtrl.learner.distributions: policy heads, action distributions, env actions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as D
from gymnasium import spaces

from mtrl.learner.distributions import (
    LOG_STD_MAX,
    Categorical,
    DiagGaussian,
    PolicyDist,
    env_actions,
    env_actions_tensor,
    make_policy_head,
)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_categorical_matches_torch_reference():
    logits = torch.randn(3, 5, 6) * 3
    ours, ref = Categorical(logits), D.Categorical(logits=logits)
    actions = torch.randint(0, 6, (3, 5))
    torch.testing.assert_close(ours.log_prob(actions), ref.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), ref.entropy())
    assert torch.equal(ours.mode(), logits.argmax(-1))
    assert ours.batch_shape == (3, 5) and isinstance(ours, PolicyDist)


def test_categorical_sample_frequencies_match_probabilities():
    logits = torch.tensor([0.0, 1.0, -1.0, 2.0])
    samples = Categorical(logits.expand(20_000, 4)).sample()
    freq = torch.bincount(samples, minlength=4).float() / samples.numel()
    torch.testing.assert_close(freq, torch.softmax(logits, -1), atol=0.015, rtol=0)


def test_multidiscrete_head_is_a_sum_of_independent_categoricals():
    nvec = np.array([3, 5, 2])  # unequal sizes exercise the padded layout
    head = make_policy_head(spaces.MultiDiscrete(nvec), 8)
    h = torch.randn(4, 7, 8)
    dist = head(h)
    actions = dist.sample()
    assert actions.shape == (4, 7, 3) and actions.dtype == torch.int64
    for d, n in enumerate(nvec):
        assert actions[..., d].min() >= 0 and actions[..., d].max() < n
    flat = head.linear(h).split(list(nvec), dim=-1)
    refs = [D.Categorical(logits=chunk) for chunk in flat]
    ref_lp = sum(r.log_prob(actions[..., d]) for d, r in enumerate(refs))
    torch.testing.assert_close(dist.log_prob(actions), ref_lp)
    torch.testing.assert_close(dist.entropy(), sum(r.entropy() for r in refs))
    mode = torch.stack([chunk.argmax(-1) for chunk in flat], dim=-1)
    assert torch.equal(dist.mode(), mode)


def test_multidiscrete_padding_is_never_sampled():
    head = make_policy_head(spaces.MultiDiscrete([2, 6]), 4)
    with torch.no_grad():
        head.linear.bias.copy_(torch.tensor([-50.0, -50.0, 0, 0, 0, 0, 0, 0]))
    actions = head(torch.zeros(10_000, 4)).sample()
    assert actions[:, 0].max() <= 1


def test_gaussian_matches_torch_reference():
    mean, log_std = torch.randn(3, 5, 2), torch.randn(2)
    ours = DiagGaussian(mean, log_std, event_ndim=1)
    ref = D.Independent(D.Normal(mean, log_std.exp()), 1)
    actions = ours.sample()
    assert actions.shape == (3, 5, 2) and ours.batch_shape == (3, 5)
    torch.testing.assert_close(ours.log_prob(actions), ref.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), ref.entropy())
    assert torch.equal(ours.mode(), mean)


def test_gaussian_head_log_std_starts_at_zero_and_is_clamped():
    head = make_policy_head(spaces.Box(-np.inf, np.inf, (2, 3)), 8)
    dist = head(torch.randn(5, 8))
    assert dist.sample().shape == (5, 2, 3)
    torch.testing.assert_close(dist.entropy(), torch.full((5,), 6 * 0.5 * (1 + np.log(2 * np.pi))))
    head.set_log_std(50.0)
    dist = head(torch.randn(5, 8))
    assert torch.all(dist.log_std == LOG_STD_MAX)
    assert torch.isfinite(dist.log_prob(torch.full((5, 2, 3), 1e6))).all()


def test_masked_actions_are_never_sampled_and_mode_is_legal():
    head = make_policy_head(spaces.Discrete(5), 4)
    with torch.no_grad():  # make the illegal action 0 by far the most likely
        head.linear.bias.copy_(torch.tensor([30.0, 0.0, 0.0, -2.0, 0.0]))
    mask = torch.tensor([0, 1, 0, 1, 0], dtype=torch.int8).expand(10_000, 5)
    dist = head(torch.randn(10_000, 4), mask)
    samples = dist.sample()
    assert set(samples.unique().tolist()) <= {1, 3}
    assert torch.all((dist.mode() == 1) | (dist.mode() == 3))
    assert torch.isfinite(dist.log_prob(samples)).all()
    assert torch.isfinite(dist.entropy()).all()
    probs = dist.log_prob(torch.zeros(10_000, dtype=torch.long)).exp()
    assert torch.all(probs == 0)


def test_masked_logits_keep_gradients_finite():
    head = make_policy_head(spaces.Discrete(4), 3)
    mask = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 0]], dtype=torch.bool)  # row 2: none legal
    h = torch.randn(2, 3)
    dist = head(h, mask)
    (dist.log_prob(dist.sample()).sum() + dist.entropy().sum()).backward()
    assert all(torch.isfinite(p.grad).all() for p in head.parameters())
    # a step with no legal action falls back to all actions
    torch.testing.assert_close(dist.entropy()[1], head(h).entropy()[1].detach())


def test_multidiscrete_mask_is_per_dimension_concatenated():
    head = make_policy_head(spaces.MultiDiscrete([3, 2]), 4)
    mask = torch.tensor([0, 0, 1, 1, 0]).expand(2_000, 5)
    actions = head(torch.randn(2_000, 4), mask).sample()
    assert torch.all(actions[:, 0] == 2) and torch.all(actions[:, 1] == 0)
    with pytest.raises(ValueError, match="expected 5"):
        head(torch.randn(2, 4), torch.ones(2, 4))


def test_box_head_rejects_an_action_mask():
    head = make_policy_head(spaces.Box(-1, 1, (2,)), 4)
    with pytest.raises(ValueError, match="meaningless"):
        head(torch.randn(2, 4), torch.ones(2, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_env_actions_box_always_within_bounds(dtype):
    low, high = np.array([-2.0, 0.0, 1e-3], dtype), np.array([3.0, 1.0, 2e-3], dtype)
    space = spaces.Box(low, high, dtype=dtype)
    raw = torch.tensor(
        [[-1e30, 1e30, 0.0], [1e4, -1e4, 50.0], [0.0, 0.0, -50.0], [float("inf"), 3.0, -3.0]]
    )
    out = env_actions(space, raw)
    assert out.dtype == dtype and out.shape == (4, 3)
    assert np.all(out >= space.low) and np.all(out <= space.high)
    np.testing.assert_allclose(out[2, :2], [0.5, 0.5])  # u = 0 → the middle of the range
    np.testing.assert_allclose(out[0, :2], [-2.0, 1.0])
    on_device = env_actions_tensor(space, raw.to(torch.float64)).numpy()
    np.testing.assert_allclose(on_device, out, rtol=1e-6)


def test_env_actions_box_unbounded_dims_pass_through():
    low, high = np.array([-np.inf, -1.0], np.float32), np.array([np.inf, 1.0], np.float32)
    space = spaces.Box(low, high, dtype=np.float32)
    out = env_actions(space, torch.tensor([[123.0, 0.0]]))
    np.testing.assert_allclose(out, [[123.0, 0.0]])
    assert torch.isfinite(env_actions_tensor(space, torch.tensor([[5.0, 9.0]]))).all()


def test_env_actions_discrete_and_multidiscrete_add_start():
    out = env_actions(spaces.Discrete(4, start=-1), torch.tensor([0, 3]))
    assert out.dtype == np.int64 and out.tolist() == [-1, 2]
    md = spaces.MultiDiscrete([3, 4], start=[1, 0], dtype=np.int32)
    out = env_actions(md, torch.tensor([[2, 3], [0, 0]]))
    assert out.dtype == np.int32 and out.tolist() == [[3, 3], [1, 0]]
    assert all(md.contains(a) for a in out)
    assert env_actions_tensor(md, torch.tensor([[2, 3]])).tolist() == [[3, 3]]


def test_unsupported_action_space_is_named():
    with pytest.raises(TypeError, match="MultiBinary"):
        make_policy_head(spaces.MultiBinary(3), 4)


def test_squashed_entropy_matches_monte_carlo_of_the_env_action():
    # H(a) for a = c + w·tanh(u), u ~ N(m, s): H(u) + log w + E[log(1 − tanh²u)].
    torch.manual_seed(0)
    head = make_policy_head(spaces.Box(np.array([-3.0, 0.0]), np.array([3.0, 10.0])), 4)
    head.set_log_std(torch.tensor([0.3, -1.0]))
    dist = head(torch.randn(3, 4))
    u = dist.mean + dist.log_std.exp() * torch.randn(400_000, 3, 2)
    log_jac = torch.log1p(-(torch.tanh(u) ** 2)) + torch.log(torch.tensor([3.0, 5.0]))
    raw = 0.5 + 0.5 * np.log(2 * np.pi) + dist.log_std
    expected = (raw + log_jac.mean(0)).sum(-1)
    torch.testing.assert_close(dist.entropy(), expected, atol=5e-3, rtol=0)


def test_squashed_entropy_pulls_a_saturated_mean_back():
    head = make_policy_head(spaces.Box(-1, 1, (1,)), 2)
    mean = torch.tensor([[0.0], [1.0], [4.0], [-6.0], [40.0]], requires_grad=True)
    dist = DiagGaussian(mean, torch.zeros(1), 1, head.log_half_width)
    h = dist.entropy()
    assert h[0] > h[1] > h[2] and h[2] > h[4]  # entropy falls as the mean saturates
    assert torch.isfinite(h).all()
    h.sum().backward()
    grad = mean.grad.squeeze(-1)
    assert grad[0].abs() < 1e-6  # centred: no pull
    assert grad[2] < -1.0 and grad[3] > 1.0 and grad[4] < -1.0  # ascent moves it back to 0
    raw = DiagGaussian(mean.detach(), torch.zeros(1), 1)  # the raw Gaussian ignores the bounds
    assert torch.allclose(raw.entropy(), raw.entropy()[0].expand(5))


def test_unbounded_dims_keep_the_gaussian_entropy():
    box = spaces.Box(np.array([-np.inf, -2.0, 0.0]), np.array([np.inf, 2.0, np.inf]))
    head = make_policy_head(box, 4)
    dist = head(torch.randn(7, 4))
    assert torch.isnan(head.log_half_width[0]) and torch.isnan(head.log_half_width[2])
    raw = DiagGaussian(dist.mean, dist.log_std, 1).entropy()
    squash = (raw - dist.entropy()).detach()
    assert torch.all(squash > 0)  # only dim 1 is squashed, and that lowers the entropy ...
    one = DiagGaussian(dist.mean[:, 1:2], dist.log_std[:, 1:2], 1, head.log_half_width[1:2])
    raw_one = DiagGaussian(dist.mean[:, 1:2], dist.log_std[:, 1:2], 1).entropy()
    torch.testing.assert_close(squash, (raw_one - one.entropy()).detach())  # ... by dim 1's term


def _log_std_after_adam(step_scale: float, steps: int = 20, lr: float = 1e-3) -> torch.Tensor:
    """The log-std after ``steps`` Adam updates that all ask for a narrower policy: actions
    drawn near the mean, each made more likely."""
    torch.manual_seed(0)
    head = make_policy_head(spaces.Box(-1.0, 1.0, (2,)), 4, log_std_step_scale=step_scale)
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    h = torch.randn(64, 4)
    for _ in range(steps):
        dist = head(h)
        loss = -dist.log_prob(dist.mean.detach() + 0.1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return head.log_std.detach()


def test_log_std_step_scale_makes_adam_move_the_log_std_that_much_faster():
    """Adam moves a parameter ~lr per step whatever its gradient; the scale multiplies that
    for the log-std (20 steps at lr 1e-3: ~0.02 unscaled, ~0.2 at scale 10)."""
    slow, fast = _log_std_after_adam(1.0), _log_std_after_adam(10.0)
    assert torch.all(slow < 0) and torch.all(fast < 0)  # both narrow the policy
    torch.testing.assert_close(slow, torch.full((2,), -0.02), atol=2e-3, rtol=0)
    torch.testing.assert_close(fast, 10 * slow, rtol=0.05, atol=0)


def test_log_std_step_scale_leaves_the_distribution_alone():
    h = torch.randn(7, 4)
    a, b = (make_policy_head(spaces.Box(-2.0, 2.0, (3,)), 4, log_std_step_scale=k) for k in (1, 10))
    b.load_state_dict(a.state_dict())  # same mean weights, log-std carried over by value
    a.set_log_std(torch.tensor([0.2, -0.4, -1.5]))
    b.set_log_std(torch.tensor([0.2, -0.4, -1.5]))
    da, db = a(h), b(h)
    x = torch.randn(7, 3)
    torch.testing.assert_close(da.log_prob(x), db.log_prob(x))
    torch.testing.assert_close(da.entropy(), db.entropy())


def test_checkpoints_that_stored_the_log_std_itself_still_load():
    head = make_policy_head(spaces.Box(-1.0, 1.0, (2,)), 4, log_std_step_scale=10.0)
    old = {k: v for k, v in head.state_dict().items() if k != "log_std_param"}
    old["log_std"] = torch.tensor([-0.5, -1.0])  # the layout before the step scale
    head.load_state_dict(old)
    torch.testing.assert_close(head.log_std.detach(), torch.tensor([-0.5, -1.0]))
    assert set(head.state_dict()) == {"mean.weight", "mean.bias", "log_std_param"}
