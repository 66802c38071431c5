"""Robust statistics against hand-computed values, and TaskStats' warm-up and bookkeeping."""

from __future__ import annotations

import pytest

from mtrl.scheduler.stats import (
    TaskStats,
    effective_rate,
    median_of_means,
    relative_iqr,
    snapshot,
    theil_sen_slope,
)


def test_median_of_means_ignores_one_spoiled_block() -> None:
    steps, seconds = [10, 10, 10, 10, 10], [1, 1, 1, 1, 100]
    assert median_of_means(steps, seconds, blocks=5) == pytest.approx(10.0)
    # One block is the plain ratio estimator, which the outlier drags down: 50 / 104.
    assert median_of_means(steps, seconds, blocks=1) == pytest.approx(50 / 104)


def test_median_of_means_blocks_are_ratios_of_sums() -> None:
    # Blocks [0:2], [2:4], [4:6]: 30/3 = 10, 20/4 = 5, 60/2 = 30 -> median 10.
    steps, seconds = [10, 20, 10, 10, 30, 30], [1, 2, 2, 2, 1, 1]
    assert median_of_means(steps, seconds, blocks=3) == pytest.approx(10.0)


def test_relative_iqr_by_hand() -> None:
    assert relative_iqr([1, 2, 3, 4, 5]) == pytest.approx((4 - 2) / 3)
    assert relative_iqr([1, 2, 3, 4, 500]) == pytest.approx((4 - 2) / 3)  # outlier-proof
    assert relative_iqr([2.0, 2.0, 2.0]) == 0.0


def test_theil_sen_by_hand_and_robust_to_an_outlier() -> None:
    assert theil_sen_slope([0, 1, 2, 3], [1, 3, 5, 7]) == pytest.approx(2.0)
    # Six pair slopes of 1 among the first four points, four large ones with the outlier.
    assert theil_sen_slope([0, 1, 2, 3, 4], [0, 1, 2, 3, 40]) == pytest.approx(1.0)
    assert theil_sen_slope([1, 1, 1], [0, 1, 2]) is None


def test_effective_rate_by_hand() -> None:
    # 10% of 100-step unrolls crash, each costing 9 s: 90 steps per 0.9 s + 0.9 s.
    assert effective_rate(100.0, 100.0, 0.1, 9.0) == pytest.approx(50.0)
    assert effective_rate(100.0, 100.0, 0.0, 9.0) == pytest.approx(100.0)


def test_warm_up_is_ignored_and_warmth_needs_enough_unrolls() -> None:
    s = TaskStats("t", warmup_s=10.0, min_unrolls=3)
    s.observe_unroll(100, 50.0, now=0.0)  # a slow first unroll (imports, JIT): ignored
    s.observe_unroll(100, 50.0, now=5.0)
    assert s.steps_per_s() is None and not s.warm()
    for k in range(3):
        assert not s.warm()
        s.observe_unroll(100, 1.0, now=11.0 + k)
    assert s.warm() and s.steps_per_s() == pytest.approx(100.0)
    assert s.env_steps == 500  # warm-up steps still count as generated


def test_record_carries_every_estimate() -> None:
    s = TaskStats(
        "t", weight=2.0, target=0.9, warmup_s=0.0, min_unrolls=1, score_window=2, progress_window=6
    )
    s.observe_unroll(1_000_000, 10.0, now=1.0)
    s.observe_step_times([1.0, 2.0, 3.0, 4.0, 5.0], now=1.0)
    for score in (0.1, 0.3):  # block 1 at 1M steps: mean 0.2
        s.observe_episode(score)
    s.observe_unroll(1_000_000, 10.0, now=2.0)
    for score in (0.5, 0.7):  # block 2 at 2M steps: mean 0.6
        s.observe_episode(score)
    s.observe_unroll(1_000_000, 10.0, now=3.0)
    for score in (0.8, 1.0):  # block 3 at 3M steps: mean 0.9
        s.observe_episode(score)
    s.observe_delivered(300)
    rec = s.record(actors=4, data_share=0.25, now=3.0)
    assert (rec.name, rec.weight, rec.actors, rec.target) == ("t", 2.0, 4, 0.9)
    assert rec.steps_per_s == pytest.approx(100_000.0)
    assert rec.step_time_spread == pytest.approx(2 / 3)
    assert rec.score == pytest.approx(0.9)
    # Pair slopes of block means: 0.4, 0.35, 0.3 per million steps -> median 0.35.
    assert rec.progress == pytest.approx(0.35)
    assert rec.delivered == 300 and rec.data_share == 0.25 and rec.warm


def test_crash_downtime_lowers_the_rate_and_failures_quarantine() -> None:
    s = TaskStats("t", warmup_s=0.0, min_unrolls=1, max_failures=2)
    for k in range(9):
        s.observe_unroll(100, 1.0, now=float(k))
    s.observe_failure(lost_s=9.0)
    assert s.failure_prob() == pytest.approx(0.1)
    assert s.steps_per_s() == pytest.approx(50.0)  # as effective_rate by hand above
    s.observe_failure()
    assert not s.quarantined
    s.observe_failure()
    assert s.quarantined and s.record(actors=0).quarantined


def test_nan_scores_are_dropped() -> None:
    s = TaskStats("t")
    s.observe_episode(float("nan"))
    assert s.score() is None


def test_snapshot_computes_data_shares() -> None:
    a, b = TaskStats("a"), TaskStats("b")
    a.observe_delivered(300)
    b.observe_delivered(100)
    recs = snapshot([a, b], {"a": 2})
    assert [(r.name, r.actors, r.data_share) for r in recs] == [("a", 2, 0.75), ("b", 0, 0.25)]


def test_bad_observations_are_refused() -> None:
    s = TaskStats("t")
    with pytest.raises(ValueError, match="bad unroll"):
        s.observe_unroll(10, 0.0)
    with pytest.raises(ValueError, match="progress_window"):
        TaskStats("t", score_window=20, progress_window=20)
