"""Scheduler at scale, by discrete-event simulation (mtrl.scheduler.simulator).

    .venv/bin/python benchmarks/scheduler_sim.py      # writes docs/results/scheduler_sim.json

Scenarios:
  a) 3 tasks with step costs 10x apart plus one heavy-tailed (Pareto stragglers) task,
     1,000 actors: per-task learner data share under fixed vs balanced (vs progress);
  b) Atari-57-like: 57 tasks with ~10x spread of step costs, some heavy-tailed, 2,000 actors,
     1% of unrolls crash (restart after 2 s): shares, actor utilisation, scores, per policy;
  c) allocator decision time at 10,000 actors x 100 tasks (median of repeats), for the policy
     alone and for TaskStats -> records -> policy.
Prints the figures and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from mtrl.plugins import load_plugins
from mtrl.scheduler import Budget, TaskRecord, TaskStats, get_policy, snapshot
from mtrl.scheduler.simulator import SimConfig, SimResult, TaskModel, atari57_like, simulate

POLICIES = ("fixed", "balanced", "progress")


def _summary(res: SimResult) -> dict[str, object]:
    shares = np.array([res.data_share[t] / res.weight_share[t] for t in res.tasks])
    scores = np.array([res.final_score[t] for t in res.tasks])
    return {
        "share_over_weight_max_error": float(np.max(np.abs(shares - 1))),
        "share_over_weight_median_error": float(np.median(np.abs(shares - 1))),
        "share_over_weight_min_max": [float(shares.min()), float(shares.max())],
        "utilisation": res.utilisation,
        "lost": res.lost,
        "env_steps": res.env_steps,
        "failures": res.failures,
        "decisions": res.decisions,
        "decision_ms_median": res.decision_s_median * 1e3,
        "score_mean": float(scores.mean()),
        "score_capped_mean": float(np.minimum(scores / 0.9, 1.0).mean()),
        "score_median": float(np.median(scores)),
        "score_p10": float(np.percentile(scores, 10)),
        "solved": int((scores >= 0.9).sum()),
        "events": res.events,
        "wall_s": res.wall_s,
    }


def scenario_a(plugins: object) -> dict[str, object]:
    tasks = [
        TaskModel("cost_1ms", step_cost_s=0.001),
        TaskModel("cost_10ms", step_cost_s=0.01),
        TaskModel("cost_100ms", step_cost_s=0.1),
        TaskModel("heavy_tail", step_cost_s=0.003, tail_prob=0.02, tail_alpha=1.5),
    ]
    cfg = SimConfig(
        num_actors=1000,
        horizon_s=60.0,
        rebalance_every_s=5.0,
        warmup_s=2.0,
        restart_delay_s=2.0,
        switch_delay_s=0.5,
        seed=0,
    )
    out: dict[str, object] = {"config": asdict(cfg), "tasks": [asdict(t) for t in tasks]}
    print("\n(a) 4 tasks, 1,000 actors: steady-state data share (weights equal: 25% each)")
    print(f"{'policy':<10}" + "".join(f"{t.name:>12}" for t in tasks) + "   actors at end")
    for name in POLICIES:
        res = simulate(tasks, cfg, get_policy(name, plugins))
        out[name] = {
            "data_share": res.data_share,
            "final_actors": res.final_actors,
            **_summary(res),
        }
        row = "".join(f"{res.data_share[t.name]:>12.1%}" for t in tasks)
        print(f"{name:<10}{row}   {list(res.final_actors.values())}")
    return out


def scenario_b(plugins: object) -> dict[str, object]:
    tasks = atari57_like(np.random.default_rng(0))
    cfg = SimConfig(
        num_actors=2000,
        horizon_s=60.0,
        rebalance_every_s=5.0,
        inference_s=0.002,
        warmup_s=2.0,
        restart_delay_s=2.0,
        switch_delay_s=0.5,
        seed=1,
    )
    costs = [t.step_cost_s for t in tasks]
    out: dict[str, object] = {
        "config": asdict(cfg),
        "step_cost_ms_min_median_max": [
            1e3 * min(costs),
            1e3 * statistics.median(costs),
            1e3 * max(costs),
        ],
        "heavy_tailed_tasks": sum(t.tail_prob > 0 for t in tasks),
        "failure_prob_per_unroll": tasks[0].failure_prob,
    }
    print("\n(b) Atari-57-like: 57 tasks, 2,000 actors, 1% of unrolls crash")
    print(
        f"{'policy':<10}{'share/weight':>16}{'max err':>9}{'util':>7}{'restart':>9}"
        f"{'switch':>8}{'steps':>8}{'score':>7}{'capped':>7}{'p10':>6}{'solved':>7}"
        f"{'events':>9}{'wall':>7}"
    )
    for name in POLICIES:
        s = _summary(simulate(tasks, cfg, get_policy(name, plugins)))
        out[name] = s
        lo, hi = s["share_over_weight_min_max"]
        print(
            f"{name:<10}{f'{lo:.2f}..{hi:.2f}':>16}{s['share_over_weight_max_error']:>9.1%}"
            f"{s['utilisation']:>7.1%}{s['lost']['restarting']:>9.1%}"
            f"{s['lost']['switching']:>8.1%}{s['env_steps'] / 1e6:>7.0f}M"
            f"{s['score_mean']:>7.3f}{s['score_capped_mean']:>7.3f}{s['score_p10']:>6.2f}"
            f"{s['solved']:>7}"
            f"{s['events']:>9}{s['wall_s']:>6.1f}s"
        )
    return out


def _filled_stats(rng: np.random.Generator, tasks: int, window: int) -> list[TaskStats]:
    """Tasks with full windows: lognormal costs across tasks, one episode per unroll."""
    stats = []
    for i in range(tasks):
        s = TaskStats(f"task{i:03d}", float(rng.uniform(0.5, 2)), target=0.9, warmup_s=0.0)
        cost, learn = float(np.exp(rng.normal(0, 1))), float(rng.uniform(50, 5000))
        for k, t in enumerate(cost * np.exp(0.3 * rng.standard_normal(window))):
            s.observe_unroll(160, float(t), now=float(k))
            s.observe_step_times((float(t) / 20,), now=float(k))
            s.observe_episode(1 - float(np.exp(-k / learn)))
        s.observe_delivered(int(rng.integers(1, 10**6)))
        stats.append(s)
    return stats


def scenario_c(plugins: object, repeats: int = 200) -> dict[str, object]:
    rng = np.random.default_rng(0)
    n_tasks, n_actors = 100, 10_000
    stats = _filled_stats(rng, n_tasks, window=500)
    actors = {s.name: n_actors // n_tasks for s in stats}
    records: list[TaskRecord] = snapshot(stats, actors)
    budget = Budget(n_actors, min_per_task=1, floor_share=0.25)
    out: dict[str, object] = {"tasks": n_tasks, "actors": n_actors, "repeats": repeats}
    print(f"\n(c) decision time, {n_actors:,} actors x {n_tasks} tasks (median of {repeats})")
    for name in POLICIES:
        policy = get_policy(name, plugins)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            alloc = policy(records, budget)
            times.append(time.perf_counter() - t0)
        assert alloc.total == n_actors
        out[f"{name}_policy_ms"] = 1e3 * statistics.median(times)
    snap = []
    for _ in range(max(5, repeats // 10)):
        t0 = time.perf_counter()
        get_policy("progress", plugins)(snapshot(stats, actors), budget)
        snap.append(time.perf_counter() - t0)
    out["stats_to_allocation_ms"] = 1e3 * statistics.median(snap)
    for name in POLICIES:
        print(f"  {name:<9} policy alone: {out[f'{name}_policy_ms']:.2f} ms")
    print(f"  TaskStats -> records -> progress: {out['stats_to_allocation_ms']:.1f} ms")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write here instead of docs/results/")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import machine, write_result

    plugins = load_plugins(autoload=False)  # the built-in policies, through the plugin hook
    t0 = time.perf_counter()
    results = {
        "command": ".venv/bin/python benchmarks/scheduler_sim.py",
        "machine": machine(),
        "a_cost_spread": scenario_a(plugins),
        "b_atari57_like": scenario_b(plugins),
        "c_decision_time": scenario_c(plugins),
    }
    results["total_wall_s"] = time.perf_counter() - t0
    if args.out:
        args.out.write_text(json.dumps(results, indent=2, default=str) + "\n")
        path = args.out
    else:
        path = write_result("scheduler_sim", results)
    print(f"\nwrote {path} ({results['total_wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
