"""Allocation policies: exact budgets, floors, balanced shares, robustness, progress."""

from __future__ import annotations

import numpy as np
import pytest

from mtrl.scheduler import Budget, TaskRecord, TaskStats, apportion, balanced, fixed, progress
from mtrl.scheduler.policies import priorities
from mtrl.scheduler.stats import snapshot

POLICIES = [fixed, balanced, progress]


def _rec(name: str, rate: float | None = None, **kw: object) -> TaskRecord:
    return TaskRecord(name, kw.pop("weight", 1.0), steps_per_s=rate, warm=rate is not None, **kw)


def _data_share(alloc: dict[str, int], records: list[TaskRecord]) -> dict[str, float]:
    out = {r.name: alloc[r.name] * r.steps_per_s for r in records}
    total = sum(out.values())
    return {k: v / total for k, v in out.items()}


def test_apportion_by_hand() -> None:
    # 10 * [1, 2, 3] / 6 = [1.67, 3.33, 5]: floors [1, 3, 5], the spare slot to 0.67.
    assert apportion(np.array([1.0, 2.0, 3.0]), 10).tolist() == [2, 3, 5]
    # The floor raises the first task to 3 and rescales the rest: 7 * [2, 3] / 5.
    assert apportion(np.array([0.0, 2.0, 3.0]), 10, floor=3).tolist() == [3, 3, 4]
    # Infeasible floor: 5 slots for 3 tasks with floor 2 -> floor 1.
    assert apportion(np.array([0.0, 0.0, 1.0]), 5, floor=2).tolist() == [1, 1, 3]
    assert apportion(np.array([1.0, 1.0, 1.0]), 4).tolist() == [2, 1, 1]  # ties: earlier first
    assert apportion(np.array([0.0, 0.0]), 3).tolist() == [2, 1]


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.__name__)
@pytest.mark.parametrize("seed", range(20))
def test_budget_spent_exactly_floors_kept_quarantine_zero(policy, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    records = [
        _rec(
            f"t{i}",
            float(10 ** rng.uniform(-1, 4)) if rng.random() < 0.8 else None,
            weight=float(rng.uniform(0.1, 5)),
            score=float(rng.uniform(-0.5, 1.5)) if rng.random() < 0.7 else None,
            target=1.0,
            progress=float(rng.normal()) if rng.random() < 0.7 else None,
            quarantined=bool(rng.random() < 0.1),
        )
        for i in range(n)
    ]
    budget = Budget(int(rng.integers(0, 3000)), int(rng.integers(0, 4)), rng.uniform(0, 1))
    alloc = policy(records, budget)
    active = [r for r in records if not r.quarantined]
    assert set(alloc) == {r.name for r in records}
    assert alloc.total == (budget.slots if active else 0)
    floor = min(budget.min_per_task, budget.slots // max(len(active), 1))
    for r in records:
        assert alloc[r.name] == 0 if r.quarantined else alloc[r.name] >= floor
        assert alloc.reasons[r.name]


def test_fixed_follows_weights() -> None:
    records = [_rec("a", 1.0, weight=2.0), _rec("b", 100.0), _rec("c", 10.0)]
    assert dict(fixed(records, Budget(40))) == {"a": 20, "b": 10, "c": 10}


def test_balanced_equalises_data_share_for_costs_10x_apart() -> None:
    records = [_rec("cheap", 1000.0), _rec("mid", 100.0), _rec("dear", 10.0)]
    alloc = balanced(records, Budget(111))
    assert dict(alloc) == {"cheap": 1, "mid": 10, "dear": 100}
    for share in _data_share(dict(alloc), records).values():
        assert share == pytest.approx(1 / 3)
    # The fixed split gives the cheap task 100x the dear one's data.
    skewed = _data_share(dict(fixed(records, Budget(111))), records)
    assert skewed["cheap"] / skewed["dear"] == pytest.approx(100.0, rel=0.05)


def test_balanced_follows_unequal_weights() -> None:
    records = [_rec("a", 50.0, weight=2.0), _rec("b", 5.0), _rec("c", 500.0)]
    share = _data_share(dict(balanced(records, Budget(1000))), records)
    assert share["a"] == pytest.approx(0.5, rel=0.05)
    assert share["b"] == pytest.approx(0.25, rel=0.05)
    assert share["c"] == pytest.approx(0.25, rel=0.1)


def test_cold_tasks_get_the_fixed_split_and_warm_ones_share_the_rest() -> None:
    records = [_rec("cold"), _rec("fast", 100.0), _rec("slow", 25.0)]
    alloc = balanced(records, Budget(30, min_per_task=0))
    assert dict(alloc) == {"cold": 10, "fast": 4, "slow": 16}
    assert "not warm" in alloc.reasons["cold"]


def _stats(name: str, seconds: list[float]) -> TaskStats:
    s = TaskStats(name, warmup_s=0.0, min_unrolls=1)
    for k, t in enumerate(seconds):
        s.observe_unroll(100, t, now=float(k))
    return s


def test_balanced_is_robust_to_an_outlier_step_time() -> None:
    regular = [1.0] * 100
    spoiled = [1.0] * 60 + [300.0] + [1.0] * 39  # one hung step, later restarted
    base = balanced(snapshot([_stats("a", regular), _stats("b", regular)], {}), Budget(100))
    hit = balanced(snapshot([_stats("a", regular), _stats("b", spoiled)], {}), Budget(100))
    assert dict(base) == {"a": 50, "b": 50}
    assert abs(hit["b"] - 50) <= 1
    # A plain ratio over the same window would have given the task ~4x the actors.
    naive = TaskStats("b", warmup_s=0.0, min_unrolls=1, blocks=1)
    for k, t in enumerate(spoiled):
        naive.observe_unroll(100, t, now=float(k))
    plain = balanced(snapshot([_stats("a", regular), naive], {}), Budget(100))
    assert plain["b"] >= 75


def test_progress_moves_actors_from_a_solved_task_but_keeps_the_floor() -> None:
    records = [
        _rec("solved", 100.0, score=1.0, target=0.9, progress=0.0),
        _rec("learning", 100.0, score=0.4, target=0.9, progress=0.5),
        _rec("stuck", 100.0, score=0.0, target=0.9, progress=0.01),
    ]
    budget = Budget(300, min_per_task=5, floor_share=0.25)
    before = balanced(records, budget)
    after = progress(records, budget)
    assert before["solved"] == 100
    assert budget.min_per_task <= after["solved"] < 50
    assert after["solved"] >= round(0.25 * 100)  # floor_share of its weight share
    assert after["learning"] > before["learning"] and after["stuck"] > before["stuck"]
    assert after.total == 300
    # With no floor share, the hard floor of actors still holds.
    bare = progress(records, Budget(300, min_per_task=5, floor_share=0.0))
    assert bare["solved"] == 5


def test_progress_gives_a_forgetting_task_more_than_a_stable_solved_one() -> None:
    records = [
        _rec("stable", 10.0, score=0.95, target=0.9, progress=0.0),
        _rec("forgetting", 10.0, score=0.95, target=0.9, progress=-0.8),
        _rec("other", 10.0, score=0.5, target=0.9, progress=0.8),
    ]
    alloc = progress(records, Budget(90))
    assert alloc["forgetting"] > alloc["stable"]


def test_progress_compares_learning_speeds_in_fractions_of_each_target() -> None:
    # Same gap (half way) and the same speed relative to target (0.5 of it per million
    # steps), in units a thousand times apart: equal priorities, hence equal data shares.
    records = [
        _rec("pendulum", 100.0, score=475.0, target=950.0, progress=475.0),
        _rec("breakout", 100.0, score=2.5, target=5.0, progress=2.5),
        _rec("cartpole", 100.0, score=0.45, target=0.9, progress=0.45),
    ]
    alloc = progress(records, Budget(300))
    assert alloc.shares == pytest.approx({r.name: 1 / 3 for r in records})
    assert priorities(records) == pytest.approx([0.5] * 3)
    # A task moving at a tenth of the others' pace (against its target) gets less priority,
    # whatever its raw slope.
    slow = [*records[:2], _rec("cartpole", 100.0, score=0.45, target=0.9, progress=0.045)]
    assert priorities(slow)[2] < priorities(slow)[0] == pytest.approx(priorities(slow)[1])


def test_policies_are_pure() -> None:
    records = [_rec("a", 3.0, score=0.2, target=1.0, progress=0.1), _rec("b", 30.0)]
    for policy in POLICIES:
        assert dict(policy(records, Budget(17))) == dict(policy(records, Budget(17)))
