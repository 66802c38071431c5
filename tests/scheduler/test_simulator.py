"""The discrete-event simulator: balanced fixes the skew of fixed; runs are reproducible."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mtrl.scheduler import balanced, fixed
from mtrl.scheduler.sim.simulator import SimConfig, sample_unrolls, simulate
from mtrl.scheduler.sim.tasks import TaskModel, atari57_like

TASKS = [
    TaskModel("cheap", step_cost_s=0.001),
    TaskModel("mid", step_cost_s=0.01),
    TaskModel("dear", step_cost_s=0.1),
    TaskModel("heavy", step_cost_s=0.003, tail_prob=0.02, tail_alpha=1.5, tail_scale=10.0),
]
# Enough actors that the cheapest task's balanced share is several actors (integer rounding
# would otherwise dominate), and a long window for the infinite-variance straggler tail.
CFG = SimConfig(
    num_actors=480,
    horizon_s=20.0,
    rebalance_every_s=2.0,
    unroll_length=10,
    envs_per_actor=4,
    warmup_s=1.0,
    restart_delay_s=0.5,
    switch_delay_s=0.1,
    stats_window=1000,
    seed=3,
)


def test_balanced_meets_weights_where_fixed_skews() -> None:
    skewed = simulate(TASKS, replace(CFG, horizon_s=4.0), fixed)  # its shares settle at once
    fair = simulate(TASKS, CFG, balanced)
    assert skewed.data_share["cheap"] > 0.5 and skewed.data_share["dear"] < 0.02
    assert skewed.max_share_error() > 1.0
    for name in fair.tasks:
        assert fair.data_share[name] == pytest.approx(0.25, rel=0.10), fair.data_share
    assert fair.final_actors["dear"] > fair.final_actors["mid"] > fair.final_actors["cheap"]
    assert sum(fair.final_actors.values()) == CFG.num_actors
    assert fair.decisions == 9 and fair.utilisation > 0.95


def test_same_seed_same_run_other_seed_other_run() -> None:
    a = simulate(TASKS, replace(CFG, horizon_s=8.0), balanced)
    b = simulate(TASKS, replace(CFG, horizon_s=8.0), balanced)
    c = simulate(TASKS, replace(CFG, horizon_s=8.0, seed=4), balanced)
    assert (a.data_share, a.final_actors, a.events) == (b.data_share, b.final_actors, b.events)
    assert a.data_share != c.data_share


def test_failures_cost_utilisation_and_a_crashing_task_is_quarantined() -> None:
    tasks = [*TASKS[:3], TaskModel("crashy", step_cost_s=0.003, failure_prob=0.5)]
    cfg = replace(CFG, horizon_s=60.0, max_failures=20)
    res = simulate(tasks, cfg, balanced)
    assert res.failures > 20
    assert res.final_actors["crashy"] == 0
    assert res.lost["restarting"] > 0 and res.utilisation < 1.0
    assert sum(res.final_actors.values()) == CFG.num_actors


def test_a_slow_learner_blocks_actors_but_shares_hold() -> None:
    # The actors could make ~100k steps/s; the learner takes 20k. Measured unroll times include
    # the wait on the full queue, so balanced still evens the shares.
    cfg = replace(CFG, learner_steps_per_s=20_000.0, queue_unrolls=32)
    res = simulate(TASKS[:3], cfg, balanced)
    assert res.lost["blocked"] > 0.3
    assert res.env_steps <= 20_000.0 * cfg.horizon_s
    for name in res.tasks:
        assert res.data_share[name] == pytest.approx(1 / 3, rel=0.05), res.data_share


def test_unroll_durations_follow_the_slowest_copy() -> None:
    rng = np.random.default_rng(0)
    task = TaskModel("t", step_cost_s=0.01, sigma=0.0)
    cfg = replace(CFG, unroll_length=5, inference_s=0.002)
    assert sample_unrolls(task, cfg, 3, rng) == pytest.approx([0.06] * 3)
    jittery = replace(task, sigma=0.5)
    mean = sample_unrolls(jittery, cfg, 2000, rng).mean()
    assert mean > 1.5 * 0.06  # the max of 4 lognormal copies is well above their median


def test_atari57_like_costs_spread_about_tenfold() -> None:
    tasks = atari57_like(np.random.default_rng(0))
    costs = [t.step_cost_s for t in tasks]
    assert len(tasks) == 57 and 5 < max(costs) / min(costs) < 100
