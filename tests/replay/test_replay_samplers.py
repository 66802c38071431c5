"""Samplers: importance weights against hand-computed values, priorities of new and updated
items, unsampleable items never drawn, R2D2 sequence priorities."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mtrl.replay import PrioritizedSampler, UniformSampler, sequence_priorities

# |td| = [3, 0, 8, 1] with eps = 1 gives p = [4, 1, 9, 2]; alpha = beta = 1/2:
# p^alpha = [2, 1, 3, sqrt 2], P(i) = p_i^alpha / (6 + sqrt 2), N = 4.
# w_i = (N P(i))^-beta / max_j w_j; the largest w is the smallest P's (item 1), so
# w_i = (P(1) / P(i))^beta = (1 / p_i^alpha)^(1/2):
WEIGHTS_BUFFER = {0: 0.70710678, 1: 1.0, 2: 0.57735027, 3: 0.84089642}


def hand_sampler(normalise: str = "buffer") -> PrioritizedSampler:
    s = PrioritizedSampler(4, alpha=0.5, beta=0.5, eps=1.0, normalise=normalise)
    s.add(np.arange(4))
    s.update_priorities(np.arange(4), np.array([3.0, 0.0, -8.0, 1.0]))
    return s


def test_importance_weights_by_hand() -> None:
    s = hand_sampler()
    idx, w = s.sample(4000, np.random.default_rng(0))
    assert w.dtype == np.float32
    for i, expected in WEIGHTS_BUFFER.items():
        np.testing.assert_allclose(w[idx == i], expected, rtol=1e-6)
    # and the frequencies follow P(i) = p_i^alpha / sum (multinomial within tolerance)
    freq = np.bincount(idx, minlength=4) / len(idx)
    np.testing.assert_allclose(freq, np.array([2, 1, 3, 2**0.5]) / (6 + 2**0.5), atol=0.01)
    assert s.max_priority == 9.0


def test_batch_normalisation_by_hand() -> None:
    """Normalised over the batch: the batch's smallest-P item gets weight 1."""
    s = hand_sampler("batch")
    rng = np.random.default_rng(3)
    s.tree.update(np.array([1, 3]), 0.0)  # only items 0 (p^a = 2) and 2 (p^a = 3) left
    idx, w = s.sample(64, rng)
    assert set(idx.tolist()) == {0, 2}
    np.testing.assert_allclose(w[idx == 0], 1.0)
    np.testing.assert_allclose(w[idx == 2], (2 / 3) ** 0.5, rtol=1e-6)  # 0.81649658


def test_new_items_get_the_largest_priority_seen() -> None:
    s = PrioritizedSampler(8, alpha=1.0, eps=1e-9)
    s.add(np.arange(2))
    np.testing.assert_allclose(s.tree.get(np.arange(2)), 1.0)  # before any feedback: 1
    s.update_priorities(np.array([0, 1]), np.array([5.0, 0.5]))
    s.update_priorities(np.array([0]), np.array([0.1]))  # the maximum is remembered
    s.add(np.array([2, 3]), np.array([True, False]))
    np.testing.assert_allclose(s.tree.get(np.arange(4)), [0.1 + 1e-9, 0.5 + 1e-9, 5 + 1e-9, 0])
    assert s.count == 3


def test_unsampleable_and_overwritten_items() -> None:
    """Reset steps are never drawn; feedback for an item that has since been overwritten by a
    reset step does not revive it."""
    s = PrioritizedSampler(6)
    s.add(np.arange(6), np.array([1, 0, 1, 1, 0, 1], bool))
    rng = np.random.default_rng(1)
    idx, _ = s.sample(5000, rng)
    assert not np.isin(idx, [1, 4]).any()
    s.add(np.array([2]), np.array([False]))  # overwritten after being drawn
    s.update_priorities(np.array([2, 3]), np.array([4.0, 4.0]))
    assert s.tree.get(np.array([2]))[0] == 0.0 and s.count == 3
    with pytest.raises(ValueError, match="no sampleable items"):
        PrioritizedSampler(3).sample(2, rng)


@pytest.mark.parametrize("live", [0.9, 0.2])  # rejection draws, and draws from the list
def test_uniform_sampler_is_uniform_over_sampleable_items(live: float) -> None:
    rng = np.random.default_rng(5)
    s = UniformSampler(1000)
    flags = rng.random(600) < live
    s.add(np.arange(600), flags)
    s.add(np.arange(0, 600, 7), np.zeros(86, bool))  # overwritten by reset steps
    flags[::7] = False
    assert s.count == flags.sum()
    idx, w = s.sample(200_000, rng)
    np.testing.assert_array_equal(w, 1.0)
    counts = np.bincount(idx, minlength=1000)
    assert not counts[~np.r_[flags, np.zeros(400, bool)]].any()
    assert stats.chisquare(counts[:600][flags]).pvalue > 1e-3


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="beta"):
        PrioritizedSampler(4, beta=1.5)
    with pytest.raises(ValueError, match="normalise"):
        PrioritizedSampler(4, normalise="max")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no sampleable items"):
        UniformSampler(4).sample(1, np.random.default_rng(0))


def test_sequence_priorities_by_hand() -> None:
    td = np.array([[1.0, -4.0, 9.0], [-3.0, 2.0, 9.0], [2.0, 0.0, 9.0]])  # [T=3, n=3]
    mask = np.array([[True, True, False], [True, True, False], [False, True, False]])
    # seq 0: |td| over kept steps [1, 3]: 0.9 * 3 + 0.1 * 2 = 2.9
    # seq 1: [4, 2, 0]: 0.9 * 4 + 0.1 * 2 = 3.8; seq 2: nothing kept: 0
    np.testing.assert_allclose(sequence_priorities(td, mask), [2.9, 3.8, 0.0])
