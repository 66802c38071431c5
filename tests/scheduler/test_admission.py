"""The share gate: which waiting unrolls go into the next update."""

from __future__ import annotations

import numpy as np
import pytest

from mtrl.train.share_gate import ShareGate, Waiting, admit

NAN = float("nan")


def test_a_task_ahead_of_its_share_waits_and_one_behind_goes_first() -> None:
    counts = np.array([600.0, 400.0])  # task 0 is ahead of its 50 %
    waiting = [Waiting(0, 100, 0.0), Waiting(0, 100, 0.0), Waiting(1, 100, 0.0)]
    assert admit(waiting, counts, np.array([1.0, 1.0]), max_hold_s=5.0) == [2, 0]
    # Task 0 now leads by 200 of 1200, more than one unroll over its target of 600: it waits.


def test_a_task_may_run_ahead_by_one_unroll_and_no_more() -> None:
    counts = np.array([500.0, 500.0])
    waiting = [Waiting(0, 100, 0.0)] * 3
    # 600 of 1100 (ahead by 50), 700 of 1200 (ahead by 100 = one unroll), 800 of 1300: no.
    assert admit(waiting, counts, np.array([0.5, 0.5]), max_hold_s=5.0) == [0, 1]


def test_ungoverned_and_overdue_unrolls_always_go_in() -> None:
    counts = np.array([10_000.0, 0.0, 0.0])
    targets = np.array([0.5, 0.5, NAN])  # task 2 has no target
    waiting = [Waiting(0, 100, 0.1), Waiting(2, 100, 0.0), Waiting(0, 100, 6.0)]
    assert sorted(admit(waiting, counts, targets, max_hold_s=5.0)) == [1, 2]


def test_targets_are_renormalised_over_governed_tasks() -> None:
    counts = np.array([300.0, 100.0, 5_000.0])
    targets = np.array([0.3, 0.1, NAN])  # 75 % / 25 % of the governed samples
    assert admit([Waiting(0, 100, 0.0)], counts, targets, 5.0) == [0]
    # 800 of 900 would be 125 over its 675: more than one unroll ahead.
    assert admit([Waiting(0, 100, 0.0)], np.array([700.0, 100.0, 0.0]), targets, 5.0) == []


def test_the_task_furthest_behind_always_gets_in() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        k = int(rng.integers(2, 6))
        counts = rng.integers(0, 5_000, k).astype(float)
        targets = rng.random(k) + 0.05
        share = targets / targets.sum()
        behind = share * counts.sum() - counts
        waiting = [Waiting(int(t), 160, 0.0) for t in rng.integers(0, k, 6)]
        chosen = admit(waiting, counts, targets, 5.0)
        tasks = {w.task for w in waiting}
        if max(behind[t] for t in tasks) >= 0:
            assert chosen, "a waiting task at or behind its share was held"


@pytest.mark.parametrize("cost_ratio", [10, 100])
def test_shares_track_targets_whatever_the_production_skew(cost_ratio: int) -> None:
    """Task 0 produces ``cost_ratio`` x faster than task 1; each has 2 unroll slots. The gate
    holds task 0's unrolls, its producer blocks on full slots, and the learner's shares end
    within a few % of 50/50 (without the gate: about cost_ratio to 1)."""
    gate = ShareGate(2, max_hold_s=1e9)
    gate.set_targets([1.0, 1.0])
    period = [1, cost_ratio]  # ticks per unroll
    slots_free, progress = [2, 2], [0, 0]
    waiting: list[Waiting] = []
    delivered = np.zeros(2)
    for _tick in range(20_000):
        for task in (0, 1):
            if slots_free[task] == 0:
                continue  # blocked: all its slots wait at the gate
            progress[task] += 1
            if progress[task] == period[task]:
                progress[task] = 0
                slots_free[task] -= 1
                waiting.append(Waiting(task, 100, 0.0))
        take = gate.admit(waiting)
        if take:
            batch = [waiting[k] for k in take]
            waiting = [w for k, w in enumerate(waiting) if k not in set(take)]
            gate.delivered([(w.task, w.samples) for w in batch])
            for w in batch:
                slots_free[w.task] += 1
                delivered[w.task] += w.samples
    share = delivered / delivered.sum()
    assert abs(share[0] - 0.5) < 0.02, share


def test_the_window_decays() -> None:
    gate = ShareGate(2, max_hold_s=5.0, decay=0.5)
    gate.delivered([(0, 1000)])
    gate.delivered([(1, 100)])
    np.testing.assert_allclose(gate.counts, [500.0, 100.0])
    assert gate.open
    gate.set_targets([0.5, None])
    assert not gate.open and np.isnan(gate.targets[1])
