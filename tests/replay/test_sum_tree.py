"""The sum-tree against a brute-force reference, and its sampling frequencies against the
priorities (chi-square goodness of fit, shown to reject a tree that is wrong)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from mtrl.replay import SumTree

PROPERTY = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow],
)
ALPHA = 1e-3  # reject when the goodness-of-fit p-value is below this


@st.composite
def update_sequences(draw: st.DrawFn) -> tuple[int, list[tuple[np.ndarray, np.ndarray]]]:
    """A capacity (often not a power of two) and batches of updates with repeated indices and
    zeros; integer priorities keep every sum exact, so the reference is exact too."""
    capacity = draw(st.integers(1, 70))
    index = st.integers(0, capacity - 1)
    batches = []
    for _ in range(draw(st.integers(1, 6))):
        idx = draw(st.lists(index, min_size=0, max_size=2 * capacity))
        pri = draw(st.lists(st.integers(0, 50), min_size=len(idx), max_size=len(idx)))
        batches.append((np.array(idx, np.int64), np.array(pri, np.float64)))
    return capacity, batches


@PROPERTY
@given(update_sequences(), st.integers(0, 2**32 - 1))
def test_matches_brute_force(case: tuple, seed: int) -> None:
    capacity, batches = case
    tree, ref = SumTree(capacity), np.zeros(capacity)
    for idx, pri in batches:
        tree.update(idx, pri)
        for i, p in zip(idx, pri, strict=True):  # the reference: one write at a time
            ref[i] = p
        np.testing.assert_array_equal(tree.leaves, ref)
        np.testing.assert_array_equal(tree.get(np.arange(capacity)), ref)
        assert tree.total == ref.sum()
        assert tree.count == int((ref > 0).sum())
        assert tree.min == (ref[ref > 0].min() if (ref > 0).any() else np.inf)
        if ref.sum() == 0:
            continue
        cum = np.cumsum(ref)
        rng = np.random.default_rng(seed)
        # random points, every boundary exactly, and just below each boundary
        points = np.concatenate(
            [rng.random(64) * cum[-1], cum[:-1], np.nextafter(cum, -np.inf), [0.0]]
        )
        points = points[(points >= 0) & (points < cum[-1])]
        np.testing.assert_array_equal(tree.find(points), np.searchsorted(cum, points, "right"))


@PROPERTY
@given(
    st.lists(st.floats(0, 1e6, allow_subnormal=False), min_size=1, max_size=40),
    st.integers(0, 2**32 - 1),
)
def test_never_lands_on_an_empty_item(priorities: list[float], seed: int) -> None:
    """Float sums round; queries at or past the total (or just below it) still end on a
    positive priority, and so does every stratified draw."""
    pri = np.array(priorities)
    pri[::3] = 0.0
    if not (pri > 0).any():
        pri[-1] = 1.0
    tree = SumTree(len(pri))
    tree.update(np.arange(len(pri)), pri)
    total = tree.total
    points = np.array([0.0, total, np.nextafter(total, 0), np.nextafter(total, np.inf), 2 * total])
    assert (pri[tree.find(points)] > 0).all()
    assert (pri[tree.sample(257, np.random.default_rng(seed))] > 0).all()


def test_rebuilt_from_leaves_is_bit_identical() -> None:
    rng = np.random.default_rng(0)
    tree = SumTree(1000)
    for _ in range(50):
        tree.update(rng.integers(0, 1000, 64), rng.random(64) ** 3)
    rebuilt = SumTree(1000)
    rebuilt.load_leaves(tree.leaves)
    assert rebuilt._sum.tobytes() == tree._sum.tobytes()
    assert rebuilt._min.tobytes() == tree._min.tobytes() and rebuilt.count == tree.count


def test_bad_input_is_refused() -> None:
    tree = SumTree(5)
    assert tree.size == 8
    with pytest.raises(IndexError, match=r"\[0, 5\)"):
        tree.update(np.array([5]), np.array([1.0]))
    with pytest.raises(ValueError, match="finite and >= 0"):
        tree.update(np.array([0]), np.array([-1.0]))
    with pytest.raises(ValueError, match="all zero"):
        tree.sample(4, np.random.default_rng(0))


# --- sampling frequencies --------------------------------------------------------------


def chi_square_p(counts: np.ndarray, priorities: np.ndarray) -> float:
    """p-value of the counts under draws proportional to ``priorities`` (items with zero
    priority must never be drawn: a count there gives p = 0)."""
    if counts[priorities == 0].any():
        return 0.0
    keep = priorities > 0
    expected = priorities[keep] / priorities[keep].sum() * counts.sum()
    return float(stats.chisquare(counts[keep], expected).pvalue)


PRIORITIES = np.random.default_rng(7).gamma(0.7, size=100)  # skewed, as TD errors are
PRIORITIES[[3, 50, 99]] = 0.0
DRAWS = 200_000


def draw_counts(tree: SumTree) -> np.ndarray:
    """Counts of independent draws (points uniform on the total): exactly multinomial, the
    chi-square test's own assumption."""
    idx = tree.find(np.random.default_rng(2016).random(DRAWS) * tree.total)
    return np.bincount(idx, minlength=tree.capacity)


def stratified_p(tree: SumTree, priorities: np.ndarray, batch: int = 256) -> float:
    """p-value that stratified batches draw each item ``batch * P(i)`` times on average.

    Stratification makes the draws of one batch dependent (far less spread than multinomial,
    so a chi-square would accept nearly anything), but batches are independent: a one-sample
    t-test per item on its per-batch counts, Bonferroni-corrected over the items.
    """
    rng = np.random.default_rng(2016)
    counts = np.stack(
        [
            np.bincount(tree.sample(batch, rng), minlength=tree.capacity)
            for _ in range(DRAWS // batch)
        ]
    )
    expected = batch * priorities / priorities.sum()
    p = np.empty(len(priorities))
    spread = counts.std(axis=0) > 0
    p[~spread] = np.where(counts[0, ~spread] == expected[~spread], 1.0, 0.0)
    p[spread] = stats.ttest_1samp(counts[:, spread], expected[spread], axis=0).pvalue
    return float(min(1.0, p.min() * len(p)))


def test_frequencies_follow_priorities() -> None:
    tree = SumTree(len(PRIORITIES))
    tree.update(np.arange(len(PRIORITIES)), PRIORITIES)
    assert chi_square_p(draw_counts(tree), PRIORITIES) > ALPHA
    assert stratified_p(tree, PRIORITIES) > ALPHA


def test_the_frequency_tests_reject_a_wrong_tree() -> None:
    """The same tests fail for trees that sample the wrong distribution: the largest priority
    off by 5%, and a tree whose leaves were changed without recomputing the sums above."""
    wrong = PRIORITIES.copy()
    wrong[PRIORITIES.argmax()] *= 1.05
    tree = SumTree(len(wrong))
    tree.update(np.arange(len(wrong)), wrong)
    assert chi_square_p(draw_counts(tree), PRIORITIES) < ALPHA
    assert stratified_p(tree, PRIORITIES) < ALPHA

    stale = SumTree(len(PRIORITIES))
    stale.update(np.arange(len(PRIORITIES)), PRIORITIES[::-1])
    stale._sum[stale.size : stale.size + stale.capacity] = PRIORITIES  # forgot to propagate
    assert chi_square_p(draw_counts(stale), PRIORITIES) < ALPHA
    assert stratified_p(stale, PRIORITIES) < ALPHA
