"""Scheduler at scale, by discrete-event simulation (mtrl.scheduler.sim.simulator).

    .venv/bin/python benchmarks/scheduler_sim.py            # writes docs/results/scheduler_sim.json
    .venv/bin/python benchmarks/scheduler_sim.py --only d   # scenario d alone, merged into it

Scenarios:
  a) 3 tasks with step costs 10x apart plus one heavy-tailed (Pareto stragglers) task,
     1,000 actors: per-task learner data share under fixed vs balanced (vs progress);
  b) Atari-57-like: 57 tasks with ~10x spread of step costs, some heavy-tailed, 2,000 actors,
     1% of unrolls crash (restart after 2 s): shares, actor utilisation, scores, per policy;
  c) allocator decision time at 10,000 actors x 100 tasks (median of repeats), for the policy
     alone and for TaskStats -> records -> policy;
  d) node losses at 10,000 actors on 100 nodes x 100 tasks (b's generator, 20 ms median step):
     10 nodes lost, 20 more later, 15 back; per policy the shares before and after, how long the
     shares take to recover after each event, failures, utilisation and decision time; and
     balanced with moves at the unroll boundary, or with node faults kept out of its rates.
Prints the figures and writes them as JSON; with ``--only`` the scenarios run are merged into
the existing file, the others kept.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from mtrl.plugins import load_plugins
from mtrl.scheduler import Budget, TaskRecord, TaskStats, get_policy, snapshot
from mtrl.scheduler.sim.nodes import NodeEvent, recovery_s, share_errors, window_shares
from mtrl.scheduler.sim.simulator import SimConfig, SimResult, simulate
from mtrl.scheduler.sim.tasks import TaskModel, atari57_like

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
    out: dict[str, object] = {
        **_setup(tasks, cfg),
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


D_STEADY_S = 20.0
"""Scenario d reads each phase's shares over the steady 20 s before an event (and the end)."""
D_SPAN_S = 5.0
"""Window of the recovery read-out; a recovery time is at least this long."""
D_TOL = 0.2
"""Recovered: every task's 5 s share within 20% of its steady share before the event (or
within the band the 5 s windows kept before it, when that is wider)."""


def d_config() -> tuple[list[TaskModel], SimConfig]:
    """100 tasks of b's generator at simulation-code costs (20 ms median copy step), 10,000
    actors on 100 nodes: 10 nodes lost at 50.5 s, 20 more at 90.5 s, 15 of the 30 back at
    125.5 s (half-way between rebalances, so each waits ~4.5 s for the next one). Moved
    actors are killed at once and restarted on their new task, as the Ray pool does."""
    tasks = atari57_like(
        np.random.default_rng(0), n=100, median_cost_s=0.02, median_learn_steps=2e6
    )
    lost = np.random.default_rng(7).choice(100, 30, replace=False).tolist()
    events = (
        NodeEvent(50.5, "lose", tuple(lost[:10])),
        NodeEvent(90.5, "lose", tuple(lost[10:])),
        NodeEvent(125.5, "join", tuple(lost[:15])),
    )
    cfg = SimConfig(
        num_actors=10_000,
        horizon_s=160.0,
        rebalance_every_s=5.0,
        inference_s=0.002,
        warmup_s=2.0,
        restart_delay_s=2.0,
        switch_delay_s=0.5,
        seed=2,
        nodes=100,
        node_events=events,
        preempt_moves=True,
        sample_every_s=1.0,
    )
    return tasks, cfg


def _timeline(res: SimResult) -> tuple[np.ndarray, np.ndarray]:
    """Sample times from 0 and the cumulative env steps per task at each (zeros at 0)."""
    times = np.array([0.0, *res.timeline_s])
    return times, np.vstack([np.zeros((1, len(res.tasks))), res.timeline])


def _shares_between(res: SimResult, start: float, end: float) -> np.ndarray:
    """Per-task data shares of the env steps consumed between two sample times."""
    times, cum = _timeline(res)
    i, j = int(np.searchsorted(times, start - 1e-9)), int(np.searchsorted(times, end + 1e-9)) - 1
    steps = cum[j] - cum[i]
    return steps / max(float(steps.sum()), 1.0)


def _phase(res: SimResult, start: float, end: float, live: int) -> dict[str, object]:
    """Shares against weights over a steady interval: max and median error, smallest ratio."""
    w = np.array([res.weight_share[t] for t in res.tasks])
    ratio = _shares_between(res, start, end) / w
    return {
        "interval_s": [start, end],
        "live_actors": live,
        "share_over_weight_max_error": float(np.max(np.abs(ratio - 1))),
        "share_over_weight_median_error": float(np.median(np.abs(ratio - 1))),
        "share_over_weight_min": float(ratio.min()),
    }


def _recovery(res: SimResult, event: float, until: float) -> dict[str, object]:
    """How far the shares strayed from where they stood in the steady 20 s before ``event``
    (so ``fixed`` and ``progress``, which do not aim at the weights, are read alike), and when
    they came back: the end of the first 5 s window wholly after the event whose largest
    per-task deviation is within :data:`D_TOL` (or the pre-event band of 5 s windows)."""
    times, cum = _timeline(res)
    span = round(D_SPAN_S / (times[1] - times[0]))
    windows = window_shares(cum, span)
    start, end = times[:-span], times[span:]
    dev = share_errors(windows, _shares_between(res, event - D_STEADY_S, event))
    before = (start >= event - D_STEADY_S - 1e-9) & (end <= event + 1e-9)
    after = (start >= event - 1e-9) & (end <= until + 1e-9)
    band = float(dev[before].max())
    tol = max(D_TOL, band)
    rec = recovery_s(end, dev, event, D_SPAN_S, tol, until)
    upto = after & (end <= event + (rec if rec is not None else until - event) + 1e-9)
    w = np.array([res.weight_share[t] for t in res.tasks])
    return {
        "event_s": event,
        "band": band,
        "tolerance": tol,
        "recovery_s": rec,
        "worst_deviation": float(dev[upto].max()),
        "worst_min_share_over_weight": float((windows[upto] / w).min()),
    }


def _longest_gap_s(res: SimResult, after_s: float) -> float:
    """The longest stretch (whole sample periods) in which some task got no data at all."""
    times, cum = _timeline(res)
    starved = np.diff(cum[times >= after_s - 1e-9], axis=0) == 0
    longest = run = np.zeros(starved.shape[1], dtype=int)
    for row in starved:
        run = np.where(row, run + 1, 0)
        longest = np.maximum(longest, run)
    return float(longest.max() * (times[1] - times[0]))


D_RUNS: tuple[tuple[str, str, str, dict[str, bool]], ...] = (
    ("fixed", "fixed", "fixed", {}),
    ("balanced", "balanced", "balanced", {}),
    ("progress", "progress", "progress", {}),
    ("balanced_boundary_moves", "balanced", "balanced, b", {"preempt_moves": False}),
    ("balanced_node_faults_ignored", "balanced", "balanced, f", {"node_faults_to_stats": False}),
)
"""(key, policy, label, changes to :func:`d_config`). As the Ray pool, the first three kill a
moved actor at once (its unroll is dropped) and feed node-loss faults to the tasks' failure
statistics; the variants show what each costs: moves at the unroll boundary (the process
pools' way) and node-loss faults kept out of the rate estimate."""


def _d_run(res: SimResult, cfg: SimConfig, lives: list[int]) -> dict[str, object]:
    """One policy's figures: steady phases, recovery after each event, failures, starvation."""
    events = [e.time_s for e in cfg.node_events]
    ends = [*events, cfg.horizon_s]
    return {
        "phases": [
            _phase(res, end - D_STEADY_S, end, live)
            for end, live in zip(ends, [cfg.num_actors, *lives], strict=True)
        ],
        "recoveries": [_recovery(res, e, until) for e, until in zip(events, ends[1:], strict=True)],
        "failures": res.failures,
        "node_failures": res.node_failures,
        "preempted_unrolls": res.preempted,
        "task_failures_min_max": [min(res.task_failures.values()), max(res.task_failures.values())],
        "longest_no_data_s_after_warmup": _longest_gap_s(res, after_s=30.0),
        "final_live_actors": sum(res.final_actors.values()),
        "final_min_actors": min(res.final_actors.values()),
        **{k: v for k, v in _summary(res).items() if k != "failures"},
    }


def _setup(tasks: list[TaskModel], cfg: SimConfig) -> dict[str, object]:
    """What a scenario ran: its config and the spread of its tasks' step costs."""
    costs = [t.step_cost_s for t in tasks]
    return {
        "config": asdict(cfg),
        "step_cost_ms_min_median_max": [
            1e3 * min(costs),
            1e3 * statistics.median(costs),
            1e3 * max(costs),
        ],
        "heavy_tailed_tasks": sum(t.tail_prob > 0 for t in tasks),
        "failure_prob_per_unroll": tasks[0].failure_prob,
    }


def scenario_d(plugins: object) -> dict[str, object]:
    tasks, cfg = d_config()
    out: dict[str, object] = {
        **_setup(tasks, cfg),
        "steady_s": D_STEADY_S,
        "window_s": D_SPAN_S,
        "tolerance": D_TOL,
    }
    lives, live = [], cfg.num_actors
    for e in cfg.node_events:  # every node holds num_actors / nodes slots here
        live += (1 if e.kind == "join" else -1) * len(e.nodes) * cfg.num_actors // cfg.nodes
        lives.append(live)
    print(
        f"\n(d) node losses: {cfg.num_actors:,} actors on {cfg.nodes} nodes, {len(tasks)} tasks;"
        f" live actors {cfg.num_actors:,} -> {' -> '.join(f'{n:,}' for n in lives)}"
        f" at {', '.join(f'{e.time_s:g}' for e in cfg.node_events)} s"
    )
    print(
        f"{'policy':<12}{'max err before/1st/2nd/join':>29}{'min s/w':>8}{'recovery s':>12}"
        f"{'dip':>6}{'gap':>5}{'util':>7}{'fail':>7}{'node':>6}{'decide':>8}{'wall':>6}"
    )
    t0 = time.perf_counter()
    for key, policy, label, changes in D_RUNS:
        res = simulate(tasks, replace(cfg, **changes), get_policy(policy, plugins))
        s = out[key] = _d_run(res, cfg, lives)
        errs = "/".join(f"{p['share_over_weight_max_error']:.0%}" for p in s["phases"])
        low = min(float(p["share_over_weight_min"]) for p in s["phases"])
        rec = "/".join(
            "-" if r["recovery_s"] is None else f"{r['recovery_s']:.0f}" for r in s["recoveries"]
        )
        dip = min(float(r["worst_min_share_over_weight"]) for r in s["recoveries"])
        print(
            f"{label:<12}{errs:>29}{low:>8.2f}{rec:>12}{dip:>6.2f}"
            f"{s['longest_no_data_s_after_warmup']:>4.0f}s{res.utilisation:>7.1%}"
            f"{res.failures:>7}{res.node_failures:>6}{res.decision_s_median * 1e3:>6.0f}ms"
            f"{res.wall_s:>5.0f}s"
        )
    out["wall_s"] = time.perf_counter() - t0
    print(
        "  moved actors are killed at once, as the Ray pool stops them; b: they switch at their\n"
        "  unroll boundary instead; f: node-loss faults counted but not fed to the rate estimate\n"
        f"  scenario d: {out['wall_s']:.0f} s of wall"
    )
    return out


SCENARIOS = {
    "a": ("a_cost_spread", scenario_a),
    "b": ("b_atari57_like", scenario_b),
    "c": ("c_decision_time", scenario_c),
    "d": ("d_node_losses", scenario_d),
}
COMMAND = ".venv/bin/python benchmarks/scheduler_sim.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write here instead of docs/results/")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=sorted(SCENARIOS),
        help="run these scenarios and merge them into the existing results file",
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import RESULTS, machine, write_result

    plugins = load_plugins(autoload=False)  # the built-in policies, through the plugin hook
    path = args.out or RESULTS / "scheduler_sim.json"
    t0 = time.perf_counter()
    if args.only:
        results = json.loads(path.read_text()) if path.exists() else {}
        for key in args.only:  # each merged scenario says how and where it was measured
            name, run = SCENARIOS[key]
            results[name] = {
                "command": f"{COMMAND} --only {key}",
                "machine": machine(),
                **run(plugins),
            }
    else:
        results = {"command": COMMAND, "machine": machine()}
        results.update({name: run(plugins) for name, run in SCENARIOS.values()})
        results["total_wall_s"] = time.perf_counter() - t0
    text = json.dumps(results, indent=2, default=str) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        path = write_result("scheduler_sim", results)
    print(f"\nwrote {path} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
