"""PPO's math against hand-computed values and direct loops: GAE(λ) (with terminations and
truncations in mtrl's unroll convention), the clipped surrogate, the clipped value loss,
per-task advantage normalisation and the logged KL and clip fraction."""

from __future__ import annotations

import math

import pytest
import torch
from mtrl_ppo.losses import (
    approx_kl,
    clip_fraction,
    clipped_surrogate,
    gae,
    normalize_per_task,
    value_loss,
)


def _gae_direct(r, v, boot, term, trunc, gamma, lam):
    """Â_t = Σ_l (γλ)^l δ_{t+l}, summed forward term by term until the episode ends."""
    t_len, n = r.shape
    values = torch.cat([v, boot[None]])
    out = torch.zeros(t_len, n, dtype=torch.float64)
    for j in range(n):
        for t in range(t_len):
            total, factor = 0.0, 1.0
            for u in range(t, t_len):
                nxt = 0.0 if term[u, j] else float(values[u + 1, j])
                delta = float(r[u, j]) + gamma * nxt - float(values[u, j])
                total += factor * delta
                if term[u, j] or trunc[u, j]:
                    break
                factor *= gamma * lam
            out[t, j] = total
    return out


def test_gae_by_hand_on_a_three_step_unroll() -> None:
    r = torch.tensor([[1.0], [2.0], [3.0]])
    v = torch.tensor([[0.5], [1.0], [1.5]])
    boot = torch.tensor([2.0])
    no = torch.zeros(3, 1, dtype=torch.bool)
    got = gae(r, v, boot, no, no, gamma=0.9, lam=0.5)
    d2 = 3 + 0.9 * 2.0 - 1.5  # 3.3
    d1 = 2 + 0.9 * 1.5 - 1.0  # 2.35
    d0 = 1 + 0.9 * 1.0 - 0.5  # 1.4
    a2, a1 = d2, d1 + 0.45 * d2
    a0 = d0 + 0.45 * a1
    assert got.advantages[:, 0].tolist() == pytest.approx([a0, a1, a2])
    assert got.returns[:, 0].tolist() == pytest.approx([a0 + 0.5, a1 + 1.0, a2 + 1.5])


def test_termination_zeroes_the_bootstrap_and_truncation_keeps_it() -> None:
    r = torch.tensor([[1.0, 1.0], [7.0, 7.0]])
    v = torch.tensor([[0.0, 0.0], [4.0, 4.0]])  # row 1: the final observation's value
    boot = torch.tensor([9.0, 9.0])
    term = torch.tensor([[True, False], [False, False]])
    trunc = torch.tensor([[False, True], [False, False]])
    got = gae(r, v, boot, term, trunc, gamma=0.5, lam=1.0)
    assert got.advantages[0].tolist() == pytest.approx([1.0, 1.0 + 0.5 * 4.0])
    # Nothing of row 1 (the reset step) leaks into row 0 in either column.
    r2 = r.clone()
    r2[1] = 1000.0
    assert gae(r2, v, boot, term, trunc, 0.5, 1.0).advantages[0].tolist() == pytest.approx(
        got.advantages[0].tolist()
    )


@pytest.mark.parametrize("lam", [0.0, 0.7, 1.0])
def test_gae_matches_the_direct_sum_on_random_episodes(lam: float) -> None:
    g = torch.Generator().manual_seed(3)
    t_len, n = 12, 5
    r = torch.randn(t_len, n, generator=g, dtype=torch.float64)
    v = torch.randn(t_len, n, generator=g, dtype=torch.float64)
    boot = torch.randn(n, generator=g, dtype=torch.float64)
    term = torch.rand(t_len, n, generator=g) < 0.15
    trunc = (torch.rand(t_len, n, generator=g) < 0.1) & ~term
    got = gae(r, v, boot, term, trunc, 0.97, lam)
    want = _gae_direct(r, v, boot, term, trunc, 0.97, lam)
    torch.testing.assert_close(got.advantages, want)
    torch.testing.assert_close(got.returns, want + v)


def test_gae_refuses_mismatched_shapes_and_out_of_range_lambda() -> None:
    x = torch.zeros(3, 2)
    with pytest.raises(ValueError, match="bootstrap_value"):
        gae(x, x, torch.zeros(3), x, x, 0.9, 0.9)
    with pytest.raises(ValueError, match="lam"):
        gae(x, x, torch.zeros(2), x, x, 0.9, 1.5)


def test_clipped_surrogate_by_hand() -> None:
    # ratios 1.5, 0.5, 1.1, 0.5 with ε = 0.2
    behaviour = torch.zeros(4)
    logp = torch.log(torch.tensor([1.5, 0.5, 1.1, 0.5]))
    adv = torch.tensor([2.0, 2.0, -1.0, -1.0])
    got = clipped_surrogate(logp, behaviour, adv, clip=0.2)
    # A > 0: min(1.5·2, 1.2·2) = 2.4; min(0.5·2, 0.8·2) = 1.0 (not clipped upward).
    # A < 0: min(-1.1, -1.1) = -1.1; min(-0.5, -0.8) = -0.8 (clipped: no gain past 1 − ε).
    assert got.tolist() == pytest.approx([-2.4, -1.0, 1.1, 0.8])


def test_the_clipped_surrogate_has_no_gradient_past_the_clip_on_the_gaining_side() -> None:
    logp = torch.log(torch.tensor([1.5, 1.5])).requires_grad_()
    adv = torch.tensor([1.0, -1.0])
    clipped_surrogate(logp, torch.zeros(2), adv, clip=0.2).sum().backward()
    assert logp.grad is not None
    assert logp.grad[0] == 0.0  # ratio past 1 + ε with A > 0: clipped, no push further
    assert logp.grad[1] == pytest.approx(1.5)  # A < 0: the unclipped (pessimistic) term


def test_value_loss_plain_and_clipped_by_hand() -> None:
    value = torch.tensor([3.0, 1.2])
    target = torch.tensor([1.0, 2.0])
    old = torch.tensor([1.0, 1.0])
    assert value_loss(value, target).tolist() == pytest.approx([2.0, 0.32])
    # Clip 0.5: first clipped to 1.5 → (1.5 − 1)² = 0.25 < 4 → max keeps 4 → 2.0;
    # second inside the clip (1.2) → same both ways → 0.32.
    assert value_loss(value, target, old, 0.5).tolist() == pytest.approx([2.0, 0.32])
    # Moving toward the target past the clip: the clipped (worse) error counts.
    value2 = torch.tensor([1.9])
    got = value_loss(value2, torch.tensor([2.0]), torch.tensor([1.0]), 0.5)
    assert got.item() == pytest.approx(0.5 * (1.5 - 2.0) ** 2)
    with pytest.raises(ValueError, match="old_value"):
        value_loss(value, target, None, 0.5)


def test_advantages_are_standardised_within_each_task() -> None:
    adv = torch.tensor([1.0, 3.0, 100.0, 300.0, 500.0, 7.0])
    tasks = torch.tensor([0, 0, 1, 1, 1, 2])
    got = normalize_per_task(adv, tasks, 3)
    s0 = math.sqrt(2.0)  # unbiased std of {1, 3}
    assert got[:2].tolist() == pytest.approx([-1 / s0, 1 / s0], rel=1e-6)
    assert got[2:5].tolist() == pytest.approx([-1.0, 0.0, 1.0], rel=1e-6)
    assert got[5].item() == 0.0  # one sample: centred only


def test_approx_kl_and_clip_fraction() -> None:
    behaviour = torch.zeros(4)
    logp = torch.log(torch.tensor([1.0, 1.3, 0.7, 1.1]))
    r = torch.tensor([1.0, 1.3, 0.7, 1.1])
    want = ((r - 1) - torch.log(r)).mean().item()
    assert approx_kl(logp, behaviour).item() == pytest.approx(want)
    assert approx_kl(behaviour, behaviour).item() == 0.0
    assert clip_fraction(logp, behaviour, 0.2).item() == 0.5
