"""Nodes in the scheduler simulator: a lost node's actors die with their unrolls, the budget
follows the live nodes, and balanced repairs the shares after a loss."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mtrl.scheduler import Budget, TaskRecord, balanced, fixed
from mtrl.scheduler.sim.nodes import (
    NodeEvent,
    node_slots,
    recovery_s,
    resized,
    share_errors,
    window_shares,
)
from mtrl.scheduler.sim.simulator import SimConfig, simulate
from mtrl.scheduler.sim.tasks import TaskModel

# Regular tasks (no jitter): every unroll takes exactly 10 steps x 10 ms = 0.1 s.
EXACT = [TaskModel(f"t{i}", step_cost_s=0.01, sigma=0.0) for i in range(4)]
EXACT_CFG = SimConfig(
    num_actors=30,
    horizon_s=1.05,
    rebalance_every_s=10.0,  # no rebalance: the actors stay where the loss left them
    unroll_length=10,
    envs_per_actor=2,
    warmup_s=0.0,
    nodes=3,
    node_events=(NodeEvent(0.55, "lose", (1,)),),
)


def test_a_lost_node_drops_exactly_its_actors_unrolls_and_counts_them_per_task() -> None:
    res = simulate(EXACT, EXACT_CFG, fixed)
    split = fixed([TaskRecord(t.name, 1.0) for t in EXACT], Budget(30))
    owner = np.repeat(np.arange(4), [split[t.name] for t in EXACT])  # task of each actor slot
    lost = np.bincount(owner[10:20], minlength=4)  # node 1 holds slots 10..19
    assert lost.sum() == 10 and np.count_nonzero(lost) == 2  # the node served two tasks
    assert res.task_failures == {t.name: int(n) for t, n in zip(EXACT, lost, strict=True)}
    assert res.failures == res.node_failures == 10
    # Survivors hand over unrolls at 0.1, 0.2, ..., 1.0 s; the lost actors only up to 0.5 s:
    # the unroll they were stepping at 0.55 s never arrives, and nothing after it.
    alive = np.bincount(owner, minlength=4) - lost
    want = (10 * alive + 5 * lost) * EXACT_CFG.unroll_length * EXACT_CFG.envs_per_actor
    got = [round(res.data_share_all[t.name] * res.env_steps) for t in EXACT]
    assert got == want.tolist()
    assert res.final_actors == {t.name: int(n) for t, n in zip(EXACT, alive, strict=True)}
    # Dead actors are not idle: utilisation is over the live nodes' actor time.
    assert res.utilisation == pytest.approx(1.0)


def test_without_node_events_the_node_layout_changes_nothing() -> None:
    cfg = replace(EXACT_CFG, node_events=(), rebalance_every_s=0.3)
    tasks = [replace(t, sigma=0.3, failure_prob=0.05) for t in EXACT]
    one, three = simulate(tasks, replace(cfg, nodes=1), balanced), simulate(tasks, cfg, balanced)
    assert (one.data_share_all, one.events, one.failures) == (
        three.data_share_all,
        three.events,
        three.failures,
    )
    assert three.node_failures == 0 and three.failures > 0


def test_the_budget_follows_the_live_nodes() -> None:
    seen: list[int] = []

    def recording(records: list[TaskRecord], budget: Budget) -> object:
        seen.append(budget.slots)
        return balanced(records, budget)

    cfg = replace(
        EXACT_CFG,
        num_actors=40,
        nodes=4,
        horizon_s=5.5,
        rebalance_every_s=1.0,
        switch_delay_s=0.1,
        node_events=(NodeEvent(1.5, "lose", (1, 2)), NodeEvent(3.5, "join", (1,))),
    )
    res = simulate(EXACT, cfg, recording)
    # The first split at 0 s, then rebalances at 1, 2, 3, 4 and 5 s.
    assert seen == [40, 40, 20, 20, 30, 30]
    assert sum(res.final_actors.values()) == 30 and min(res.final_actors.values()) >= 1
    # The joined node's 10 actors idle from 3.5 s to the 4 s rebalance, out of 40 x 1.5 +
    # 20 x 2 + 30 x 2 = 160 live actor-seconds.
    assert res.lost["unassigned"] == pytest.approx(10 * 0.5 / 160)


def test_preempted_moves_switch_at_once_instead_of_at_the_unroll_boundary() -> None:
    # Node 0 runs "quick" (0.1 s unrolls), node 1 "slow" (5 s unrolls). Node 0 is lost at
    # 0.55 s; the 1 s rebalance moves 5 of slow's actors to quick. Waiting for the unroll
    # boundary they would switch at 5 s, past the horizon; preempted, they start at 1 s.
    tasks = [EXACT[0], replace(EXACT[1], name="slow", step_cost_s=0.5)]
    cfg = replace(
        EXACT_CFG,
        num_actors=20,
        nodes=2,
        horizon_s=3.05,
        rebalance_every_s=1.0,
        switch_delay_s=0.0,
        node_events=(NodeEvent(0.55, "lose", (0,)),),
    )
    steps = EXACT_CFG.unroll_length * EXACT_CFG.envs_per_actor
    for preempt, quick_unrolls, dropped in ((False, 10 * 5, 0), (True, 10 * 5 + 5 * 20, 5)):
        res = simulate(tasks, replace(cfg, preempt_moves=preempt), fixed)
        assert res.task_failures == {"t0": 10, "slow": 0}
        assert res.preempted == dropped
        assert round(res.data_share_all["t0"] * res.env_steps) == quick_unrolls * steps
        assert res.final_actors == {"t0": 5, "slow": 5}


def test_the_budget_never_drops_below_the_per_task_floor() -> None:
    assert resized(Budget(40, min_per_task=2), 5, tasks=4).slots == 8
    assert resized(Budget(40), 25, tasks=4).slots == 25
    assert resized(Budget(40), 0, tasks=0).slots == 1


# Costs 100x apart: balanced gives the cheap tasks few actors, all on the first nodes.
TASKS = [
    TaskModel("cheap", step_cost_s=0.001),
    TaskModel("mid", step_cost_s=0.01),
    TaskModel("dear", step_cost_s=0.1),
]
LOSS_S = 10.25
CFG = SimConfig(
    num_actors=480,
    horizon_s=30.0,
    rebalance_every_s=2.0,
    unroll_length=10,
    envs_per_actor=4,
    warmup_s=1.0,
    switch_delay_s=0.1,
    seed=3,
    nodes=8,
    node_events=(NodeEvent(LOSS_S, "lose", (0, 2)),),
    sample_every_s=0.25,
)


def test_balanced_recovers_the_shares_after_a_node_loss() -> None:
    res = simulate(TASKS, CFG, balanced)
    assert sum(res.final_actors.values()) == 360
    times = np.array([0.0, *res.timeline_s])
    cum = np.vstack([np.zeros((1, 3)), res.timeline])
    span = 8  # 2 s windows; without a loss their shares wander about 15% (1 s unrolls)
    errors = share_errors(window_shares(cum, span), [1 / 3] * 3)
    ends = times[span:]
    hit = errors[(ends > LOSS_S + 1.0) & (ends <= LOSS_S + 2.0)]
    assert hit.max() > 0.5  # the loss took the cheap and mid tasks' actors
    took = recovery_s(ends, errors, LOSS_S, span_s=2.0, tol=0.25)
    # Next rebalance at 12 s, task switch, one unroll, then a clean 2 s window.
    assert took is not None and took <= 2 * CFG.rebalance_every_s + 2.0, took
    since = np.searchsorted(times, 20.0)
    late = (cum[-1] - cum[since]) / (cum[-1] - cum[since]).sum()
    assert late == pytest.approx([1 / 3] * 3, rel=0.10)


def test_window_shares_errors_and_recovery_read_the_timeline() -> None:
    cum = np.array([[0, 0], [10, 10], [20, 10], [30, 20], [40, 30]], dtype=float)
    shares = window_shares(cum, 1)
    assert shares.tolist() == [[0.5, 0.5], [1.0, 0.0], [0.5, 0.5], [0.5, 0.5]]
    errors = share_errors(shares, [0.5, 0.5])
    assert errors.tolist() == [0.0, 1.0, 0.0, 0.0]
    ends = [1.0, 2.0, 3.0, 4.0]
    assert recovery_s(ends, errors, event_s=1.0, span_s=1.0, tol=0.1) == 2.0
    assert recovery_s(ends, errors, event_s=1.0, span_s=1.0, tol=0.1, until_s=2.5) is None
    assert window_shares(cum, 5).shape == (0, 2)


def test_nodes_are_contiguous_blocks_and_bad_events_are_refused() -> None:
    assert node_slots(10, 3) == [range(0, 3), range(3, 6), range(6, 10)]
    with pytest.raises(ValueError, match="nodes"):
        node_slots(3, 4)
    with pytest.raises(ValueError, match="kind"):
        NodeEvent(1.0, "crash", (0,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="names nodes"):
        simulate(EXACT, replace(EXACT_CFG, node_events=(NodeEvent(0.5, "lose", (3,)),)), fixed)
