"""Tests for mtrl.learner.popart: per-task statistics, data-parallel combination, preservation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mtrl.learner.popart import (
    Moments,
    combine_moments,
    moments_from_sums,
    moments_to_sums,
    normalize,
    popart_step,
    preserve_outputs,
    sigma,
    slow_shrink,
    task_moments,
    unnormalize,
    update_stats,
)


def _head_outputs(weight, bias, mu, sig, h):
    """Unnormalised per-task values σ_i (w_i·h + b_i) + μ_i, in float64: [N, K]."""
    n = h.double() @ weight.double().T + bias.double()
    return sig.double() * n + mu.double()


def _random_stats(k: int, g: torch.Generator, dtype: torch.dtype):
    sig = 10 ** (torch.rand(k, generator=g, dtype=torch.float64) * 5 - 2)  # 1e-2 .. 1e3
    mu = torch.randn(k, generator=g, dtype=torch.float64) * sig
    return mu.to(dtype), sig.to(dtype)


# Tolerances: max |after − before| per task, relative to that task's max |before|.
# float32 head and statistics: 1e-5.  float64: 1e-12.  float32 head, float64 statistics: 1e-5.
@pytest.mark.parametrize(
    "head_dtype,stats_dtype,tol",
    [
        (torch.float32, torch.float32, 1e-5),
        (torch.float64, torch.float64, 1e-12),
        (torch.float32, torch.float64, 1e-5),
    ],
)
def test_preserve_outputs_keeps_unnormalised_values(head_dtype, stats_dtype, tol):
    g = torch.Generator().manual_seed(0)
    K, H, N = 5, 32, 256
    weight = torch.randn(K, H, generator=g, dtype=torch.float64).to(head_dtype)
    bias = torch.randn(K, generator=g, dtype=torch.float64).to(head_dtype)
    mu_old, sig_old = _random_stats(K, g, stats_dtype)
    mu_new, sig_new = _random_stats(K, g, stats_dtype)
    h = torch.randn(N, H, generator=g, dtype=torch.float64).to(head_dtype)

    w2, b2 = preserve_outputs(weight, bias, mu_old, sig_old, mu_new, sig_new)
    assert w2.dtype == head_dtype and b2.dtype == head_dtype
    before = _head_outputs(weight, bias, mu_old, sig_old, h)
    after = _head_outputs(w2, b2, mu_new, sig_new, h)
    err = (after - before).abs().amax(0) / before.abs().amax(0)
    assert err.max().item() <= tol, err
    # The normalised head did change (the test is not comparing a thing with itself).
    assert not torch.allclose(w2.double(), weight.double(), rtol=1e-2)


def _reference_moments(x: np.ndarray, ids: np.ndarray, mask: np.ndarray, k: int):
    count, mean, mean_sq = np.zeros(k), np.zeros(k), np.zeros(k)
    for i in range(k):
        sel = x[(ids == i) & mask]
        count[i] = sel.size
        if sel.size:
            mean[i], mean_sq[i] = sel.mean(), (sel**2).mean()
    return count, mean, mean_sq


@pytest.mark.parametrize("per_element_ids", [False, True])
def test_task_moments_match_reference(per_element_ids):
    rng = np.random.default_rng(1)
    T, B, K = 16, 12, 6
    x = rng.normal(0, 1, (T, B)) * rng.choice([0.01, 1.0, 1000.0], size=B)
    col_ids = rng.choice([0, 1, 2, 4, 5], size=B)  # task 3 absent
    col_ids[:3] = [0, 1, 5]
    ids = np.broadcast_to(col_ids, (T, B)).copy() if per_element_ids else col_ids
    mask = rng.random((T, B)) < 0.7
    mask[:, col_ids == 5] = False  # task 5 present but fully masked out

    m = task_moments(torch.tensor(x), torch.tensor(ids), K, mask=torch.tensor(mask))
    count, mean, mean_sq = _reference_moments(x, np.broadcast_to(ids, (T, B)), mask, K)
    np.testing.assert_array_equal(m.count.numpy(), count)
    np.testing.assert_allclose(m.mean.numpy(), mean, rtol=1e-12, atol=0)
    np.testing.assert_allclose(m.mean_sq.numpy(), mean_sq, rtol=1e-12, atol=0)
    assert count[3] == 0 and count[5] == 0 and count[0] > 0


def test_task_moments_without_mask_and_float32():
    x = torch.tensor([[1.0, 10.0], [3.0, 20.0]])
    m = task_moments(x, torch.tensor([1, 0]), num_tasks=3)
    assert m.count.dtype == torch.float32
    torch.testing.assert_close(m.count, torch.tensor([2.0, 2.0, 0.0]))
    torch.testing.assert_close(m.mean, torch.tensor([15.0, 2.0, 0.0]))
    torch.testing.assert_close(m.mean_sq, torch.tensor([250.0, 5.0, 0.0]))


def test_update_stats_moves_only_seen_tasks():
    mu = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    nu = torch.tensor([5.0, 6.0, 10.0], dtype=torch.float64)
    moments = Moments(
        count=torch.tensor([4.0, 0.0, 1.0]),
        mean=torch.tensor([3.0, 0.0, -1.0]),
        mean_sq=torch.tensor([13.0, 0.0, 1.0]),
    )
    mu2, nu2 = update_stats(mu, nu, moments, beta=0.25)
    assert mu2.dtype == torch.float64
    torch.testing.assert_close(mu2, torch.tensor([1.5, 2.0, 2.0], dtype=torch.float64))
    torch.testing.assert_close(nu2, torch.tensor([7.0, 6.0, 7.75], dtype=torch.float64))
    assert mu2[1].item() == 2.0 and nu2[1].item() == 6.0  # bit-exact for the absent task

    per_task = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
    mu3, _ = update_stats(mu, nu, moments, beta=per_task)
    torch.testing.assert_close(mu3, torch.tensor([2.0, 2.0, 3.0], dtype=torch.float64))


def test_sigma_is_clipped():
    mu = torch.tensor([0.0, 2.0, 0.0, 1e4, 3.0])
    nu = torch.tensor([4.0, 3.0, 1e-12, 1e8 + 1e14, 9.0])  # var: 4, -1, ~0, 1e14, 0
    s = sigma(mu, nu, sigma_min=1e-3, sigma_max=1e5)
    torch.testing.assert_close(s, torch.tensor([2.0, 1e-3, 1e-3, 1e5, 1e-3]))
    assert torch.isfinite(s).all()


def test_shards_combine_to_the_whole_batch():
    rng = np.random.default_rng(2)
    T, B, K = 20, 10, 4
    x = torch.tensor(rng.normal(5.0, 3.0, (T, B)))
    ids = torch.tensor([0, 0, 1, 2, 0, 1, 1, 2, 2, 2])  # shard 2 (cols 5..9) lacks task 0
    mask = torch.tensor(rng.random((T, B)) < 0.8)
    whole = task_moments(x, ids, K, mask)
    shards = [task_moments(x[:, s], ids[s], K, mask[:, s]) for s in (slice(0, 5), slice(5, 10))]
    assert shards[1].count[0] == 0

    # As replicas would: all-reduce (here: sum) the [3, K] sums, then turn them back.
    reduced = moments_from_sums(moments_to_sums(shards[0]) + moments_to_sums(shards[1]))
    for combined in (reduced, combine_moments(shards)):
        for a, b in zip(combined, whole, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)

    mu, nu = torch.zeros(K, dtype=torch.float64), torch.ones(K, dtype=torch.float64)
    expected = update_stats(mu, nu, whole, 0.1)
    for a, b in zip(update_stats(mu, nu, reduced, 0.1), expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_stationary_targets_converge_and_outputs_stay_preserved():
    g = torch.Generator().manual_seed(3)
    K, H, T, B = 3, 8, 32, 16
    true_mean = torch.tensor([3000.0, 0.02], dtype=torch.float64)
    true_std = torch.tensor([1000.0, 0.01], dtype=torch.float64)
    ids = torch.arange(B) % 2  # task 2 never appears
    mu, nu = torch.zeros(K, dtype=torch.float64), torch.ones(K, dtype=torch.float64)
    weight = torch.randn(K, H, generator=g, dtype=torch.float64)
    bias = torch.randn(K, generator=g, dtype=torch.float64)
    h = torch.randn(64, H, generator=g, dtype=torch.float64)
    s = sigma(mu, nu)
    initial = _head_outputs(weight, bias, mu, s, h)

    for _ in range(600):
        targets = (
            torch.randn(T, B, generator=g, dtype=torch.float64) * true_std[ids] + true_mean[ids]
        )
        step = popart_step(mu, nu, weight, bias, task_moments(targets, ids, K), beta=0.05)
        mu, nu, s, weight, bias = step

    torch.testing.assert_close(mu[:2], true_mean, rtol=0.01, atol=0)
    torch.testing.assert_close(s[:2], true_std, rtol=0.03, atol=0)
    assert 0.95e5 < (s[0] / s[1]).item() < 1.05e5
    assert mu[2].item() == 0.0 and nu[2].item() == 1.0
    final = _head_outputs(weight, bias, mu, s, h)
    err = (final - initial).abs().amax(0) / initial.abs().amax(0)
    assert err.max().item() < 1e-9, err


def test_first_step_takes_the_batch_moments_and_keeps_the_head():
    g = torch.Generator().manual_seed(5)
    K, H = 3, 4
    mu, nu = torch.zeros(K, dtype=torch.float64), torch.ones(K, dtype=torch.float64)
    weight = torch.randn(K, H, generator=g, dtype=torch.float64)
    bias = torch.randn(K, generator=g, dtype=torch.float64)
    targets = torch.randn(10, 6, generator=g, dtype=torch.float64) * 500 + 2000
    ids = torch.tensor([0, 0, 1, 1, 0, 1])  # task 2 is absent
    m = task_moments(targets, ids, K)
    first = torch.tensor([True, False, True])
    step = popart_step(mu, nu, weight, bias, m, beta=1e-3, first=first)
    # Task 0 (first): β = 1, statistics are the batch's, head unchanged.
    torch.testing.assert_close(step.mu[0], targets[:, ids == 0].mean(), rtol=1e-12, atol=0)
    torch.testing.assert_close(step.nu[0], (targets[:, ids == 0] ** 2).mean(), rtol=1e-12, atol=0)
    assert torch.equal(step.weight[0], weight[0]) and step.bias[0] == bias[0]
    # Task 1 (not first): the ordinary β step with output preservation.
    plain = popart_step(mu, nu, weight, bias, m, beta=1e-3)
    for a, b in zip(step, plain, strict=True):
        torch.testing.assert_close(a[1], b[1], rtol=0, atol=0)
    # Task 2 (first, but absent from the batch): prior and head kept.
    assert step.mu[2] == 0.0 and step.nu[2] == 1.0
    assert torch.equal(step.weight[2], weight[2]) and step.bias[2] == bias[2]


def test_slow_shrink_rises_at_once_and_falls_by_at_most_max_shrink():
    old = torch.tensor([10.0, 10.0, 10.0, 10.0], dtype=torch.float64)
    new = torch.tensor([20.0, 9.995, 1.0, 1.0], dtype=torch.float64)
    seen = torch.tensor([True, True, True, False])
    got = slow_shrink(new, old, 1e-3, seen)
    # Up: at once. Down a little: followed. Down a lot: 0.1 % per update. Unseen: kept.
    assert got.tolist() == [20.0, 9.995, 10.0 * (1 - 1e-3), 10.0]
    # Statistics just set from a first batch are taken outright.
    fresh = torch.tensor([False, False, True, False])
    assert slow_shrink(new, old, 1e-3, seen, fresh)[2].item() == 1.0
    # max_shrink 1 is plain PopArt: the scale is σ for every seen task.
    assert slow_shrink(new, old, 1.0, seen).tolist() == [20.0, 9.995, 1.0, 10.0]
    with pytest.raises(ValueError, match="max_shrink"):
        slow_shrink(new, old, 1.5, seen)


def test_a_collapsing_spread_leaves_a_slowly_falling_scale():
    """A solved task: targets with spread 30, then the same mean with spread 1. σ follows the
    spread down to ~1; the scale from slow_shrink falls by at most 0.1 % per update, and for
    a task whose spread does not change it stays with σ."""
    g = torch.Generator().manual_seed(4)
    K, H, T, B = 2, 8, 20, 16
    ids = torch.arange(B) % K
    mu, nu = torch.zeros(K, dtype=torch.float64), torch.ones(K, dtype=torch.float64)
    weight = torch.zeros(K, H, dtype=torch.float64)
    bias = torch.zeros(K, dtype=torch.float64)
    scale = sigma(mu, nu)
    for i in range(800):
        spread = torch.tensor([30.0 if i < 300 else 1.0, 5.0], dtype=torch.float64)
        x = torch.randn(T, B, generator=g, dtype=torch.float64) * spread[ids] + 100.0
        m = task_moments(x, ids, K)
        first = torch.full((K,), i == 0)  # statistics set from the first batch
        mu, nu, s, weight, bias = popart_step(mu, nu, weight, bias, m, beta=0.05, first=first)
        scale = slow_shrink(s, scale, 1e-3, m.count > 0, first)
    assert s[0].item() < 1.2  # σ: the collapsed spread
    assert scale[0].item() == pytest.approx(30 * 0.999**500, rel=0.1)  # ~18
    assert scale[1].item() == pytest.approx(s[1].item(), rel=0.05)
    assert s[1].item() == pytest.approx(5, rel=0.1)


def test_normalize_roundtrip_and_gradient():
    mu = torch.tensor([100.0, -1.0], dtype=torch.float64)
    sig = torch.tensor([10.0, 0.5], dtype=torch.float64)
    ids = torch.tensor([1, 0, 0])
    x = torch.tensor([[0.0, 110.0, 90.0], [-2.0, 100.0, 120.0]], requires_grad=True)
    n = normalize(x, mu, sig, ids)
    assert n.dtype == torch.float32
    torch.testing.assert_close(n, torch.tensor([[2.0, 1.0, -1.0], [-2.0, 0.0, 2.0]]))
    torch.testing.assert_close(unnormalize(n, mu, sig, ids), x)
    n.sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([[2.0, 0.1, 0.1], [2.0, 0.1, 0.1]]))


_VEC = torch.zeros(3)


@pytest.mark.parametrize(
    "name,call",
    [
        ("task_ids", lambda: task_moments(torch.zeros(4, 3), torch.zeros(4, dtype=torch.long), 3)),
        ("task_ids", lambda: task_moments(torch.zeros(4, 3), torch.zeros(3), 3)),
        ("task_ids", lambda: task_moments(torch.zeros(4, 3), torch.tensor([0, 1, 3]), 3)),
        (
            "mask",
            lambda: task_moments(
                torch.zeros(4, 3),
                torch.zeros(3, dtype=torch.long),
                3,
                mask=torch.ones(4, dtype=torch.bool),
            ),
        ),
        (
            "targets",
            lambda: task_moments(
                torch.zeros(4, dtype=torch.long), torch.zeros(4, dtype=torch.long), 3
            ),
        ),
        ("nu", lambda: update_stats(_VEC, torch.zeros(2), Moments(_VEC, _VEC, _VEC), 0.1)),
        (
            "moments.count",
            lambda: update_stats(_VEC, _VEC, Moments(torch.zeros(4), _VEC, _VEC), 0.1),
        ),
        ("beta", lambda: update_stats(_VEC, _VEC, Moments(_VEC, _VEC, _VEC), 1.5)),
        ("nu", lambda: sigma(_VEC, torch.zeros(3, 1))),
        ("sigma_min", lambda: sigma(_VEC, _VEC, sigma_min=0.0)),
        ("weight", lambda: preserve_outputs(torch.zeros(3), _VEC, _VEC, _VEC, _VEC, _VEC)),
        (
            "bias",
            lambda: preserve_outputs(torch.zeros(3, 2), torch.zeros(2), _VEC, _VEC, _VEC, _VEC),
        ),
        (
            "sigma_new",
            lambda: preserve_outputs(torch.zeros(3, 2), _VEC, _VEC, _VEC, _VEC, torch.zeros(4)),
        ),
        ("sums", lambda: moments_from_sums(torch.zeros(2, 3))),
        ("task_ids", lambda: normalize(torch.zeros(4, 3), _VEC, _VEC, torch.tensor([0, 1]))),
    ],
)
def test_bad_input_names_the_argument(name, call):
    with pytest.raises(ValueError, match=name):
        call()
