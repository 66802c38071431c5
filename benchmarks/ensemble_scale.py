"""Ensemble scale: one actor's batch env over many simulation processes, as N grows.

Melissa-style ensembles run thousands of small simulations at once. Here one batch env holds N
copies of ``heat/heat2d`` (the C + MPI code of plugins_contrib/mtrl-heat; ``--ranks`` MPI
processes and an ``--grid`` x ``--grid`` grid each), **one simulation job per copy**
(``copies_per_process=1``): N launcher, ``mpiexec``, proxy and solver process trees. For each N
of ``--copies`` it measures:

- **start-up**: seconds from building the env to the first observations of all N (every job
  launched and through its handshake);
- **env steps/s** over ``--steps`` batch steps (all N copies counted) and the batch-step wall
  time's p50/p90/p99 (a batch step waits for its slowest copy);
- **memory per copy**: the proportional set size (PSS: shared pages split among their users) of
  every process the env started, summed and divided by N; and the processes per copy;
- **faults**: ``--kills`` times, a random solver process is killed with SIGKILL while the env
  steps; measured are the seconds until the env raises (the crash detected) and the seconds to
  build the env again (what an actor restart costs: all N jobs; with ``member_restart`` off a
  batch env is one actor's unit of restart);
- **single-member restart** (``member_restart`` on, ``--member-kills`` times per N): a random
  solver killed while the env steps; the seconds until its failure is seen and its job is up
  again, the batch steps the other copies made meanwhile, and the actor seconds the restart
  cost (the masked copy-steps as ``masked / N`` batch steps, plus the steps' wall time beyond
  the usual batch step: the relaunch's own work on the actor).

**Projection** to ``--project`` simulations (default 10,000) on ``--nodes`` nodes, with the
scheduler's discrete-event simulator (:mod:`mtrl.scheduler.sim`, docs/SCHEDULER.md): one task
whose copy-step time is the lognormal fitted to ``--single-steps`` measured single-copy steps
(a batch step lasts as long as its slowest copy), for each batch size B of ``--per-actor``
(copies per actor: ``project / B`` actors); an actor's restart costs the rebuild time measured
for the nearest N (interpolated; beyond the largest N, scaled linearly) or, in a second
projection, the measured single-member restart cost; and each simulation job
crashes on average once per ``--mtbf-h`` hours of stepping, so an unroll of B copies crashes
with ``1 - exp(-B x unroll time / MTBF)``. Reported per B: actor utilisation, the share of actor
time lost to restarts, and env steps/s. (The fan-out cost of a batch step over B jobs is in the
measured rows, not in the projection.)

Usage: ``python benchmarks/ensemble_scale.py [--copies 32,64,128,256] [--steps 100] [--kills 3]
[--member-kills 3] [--ranks 1] [--grid 16] [--project 10000] [--per-actor 1,8,32,128] [--mtbf-h 1]
[--results-dir DIR]``. Writes ``ensemble_scale.json`` in ``docs/results`` or DIR. Measures
speed and memory: run it alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

from mtrl.coupling.launcher import descendants
from mtrl.plugins import get_plugins

ENV = "heat/heat2d"
MAX_EVENTS = 5_000_000  # per projected batch size


def pss_bytes(pid: int) -> int:
    """The process's proportional set size (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def solvers(root: int) -> list[int]:
    """The heat2d solver processes below ``root``."""
    out = []
    for pid in descendants(root):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if cmd.endswith(b"heat2d"):
            out.append(pid)
    return out


def build(n: int, ranks: int, grid: int, seed: int, members: bool = False) -> tuple[Any, float]:
    """A batch env of ``n`` copies, one job each, reset; and the seconds it took. ``members``:
    a failed job restarts alone (else the env fails as a whole, the actor's unit of restart)."""
    spec = get_plugins().envs.get(ENV)
    sim = dataclasses.replace(spec.make, copies_per_process=1)
    t0 = time.perf_counter()
    env = sim(num_envs=n, seed=seed, ranks=ranks, n=grid, member_restart=members)
    env.reset()
    return env, time.perf_counter() - t0


def measure(n: int, steps: int, kills: int, ranks: int, grid: int) -> dict[str, Any]:
    me = os.getpid()
    before = set(descendants(me))
    env, startup = build(n, ranks, grid, seed=0)
    actions = np.zeros((n, 4), np.float32)
    try:
        for _ in range(5):
            env.step(actions)
        procs = [p for p in descendants(me) if p not in before]
        memory = sum(pss_bytes(p) for p in procs)
        walls = []
        t0 = time.perf_counter()
        for _ in range(steps):
            s0 = time.perf_counter()
            env.step(actions)
            walls.append(time.perf_counter() - s0)
        sps = n * steps / (time.perf_counter() - t0)
    finally:
        env.close()
    detections, restarts = [], []
    rng = random.Random(n)
    for k in range(kills):
        env, rebuilt = build(n, ranks, grid, seed=1 + k)
        restarts.append(rebuilt)
        try:
            env.step(actions)
            victim = rng.choice(solvers(me))
            os.kill(victim, signal.SIGKILL)
            t_kill = time.perf_counter()
            try:
                for _ in range(10_000):
                    env.step(actions)
                detections.append(None)  # never noticed: reported as such
            except Exception:  # the crash, as the actor layer would see it
                detections.append(time.perf_counter() - t_kill)
        finally:
            env.close()
    p = np.percentile(walls, [50, 90, 99]) * 1e3
    row = {
        "copies": n,
        "startup_s": startup,
        "env_steps_per_s": sps,
        "batch_step_ms": {"p50": p[0], "p90": p[1], "p99": p[2]},
        "memory_per_copy_mb": memory / n / 2**20,
        "processes_per_copy": len(procs) / n,
        "kill_detected_s": detections,
        "rebuild_s": restarts,
    }
    det = [d for d in detections if d is not None]
    print(
        f"N={n:4d}: start-up {startup:6.1f} s | {sps:8.0f} env steps/s | batch step p50/p99 "
        f"{p[0]:6.1f}/{p[2]:6.1f} ms | {row['memory_per_copy_mb']:5.1f} MB and "
        f"{row['processes_per_copy']:.0f} processes per copy | kill seen in "
        f"{(max(det) if det else float('nan')):.2f} s (max of {len(det)}/{kills}) | rebuild "
        f"{(max(restarts) if restarts else float('nan')):.1f} s",
        flush=True,
    )
    return row


def measure_members(n: int, kills: int, ranks: int, grid: int) -> dict[str, Any]:
    """Single-member restart at ``n`` copies: ``kills`` times a random solver is killed while
    the env steps; per kill, the seconds until the failure is seen and until the job is up
    again, the batch steps the other copies made meanwhile, and the actor seconds the restart
    cost: the masked copy-steps as a share of the batch (``masked / n`` batch steps) times the
    usual batch step, plus the steps' wall time beyond the usual (the relaunch's own work)."""
    env, _ = build(n, ranks, grid, seed=0, members=True)
    actions = np.zeros((n, 4), np.float32)
    me, rng, kills_out = os.getpid(), random.Random(1000 + n), []
    try:
        for _ in range(5):
            env.step(actions)
        walls = []
        for _ in range(30):
            s0 = time.perf_counter()
            env.step(actions)
            walls.append(time.perf_counter() - s0)
        usual = float(np.median(walls))
        for _ in range(kills):
            victim = rng.choice(solvers(me))
            os.kill(victim, signal.SIGKILL)
            t_kill = time.perf_counter()
            seen, masked, steps, wall, others = None, 0, 0, 0.0, 0
            while True:
                s0 = time.perf_counter()
                out = env.step(actions)
                wall += time.perf_counter() - s0
                steps += 1
                bad = ~out.valid if out.valid is not None else np.zeros(n, bool)
                masked += int(bad.sum())
                others += int((~bad).sum())
                if seen is None and env.pop_member_faults():
                    seen = time.perf_counter() - t_kill
                if seen is not None and all(m.state == "up" for m in env.members):
                    break
                if time.perf_counter() - t_kill > 120:
                    break
            up = time.perf_counter() - t_kill
            cost = masked / n * usual + max(wall - steps * usual, 0.0)
            kills_out.append(
                {
                    "seen_s": seen,
                    "up_s": up,
                    "batch_steps_meanwhile": steps,
                    "masked_copy_steps": masked,
                    "other_copy_steps": others,
                    "cost_s": cost,
                }
            )
    finally:
        env.close()
    costs = [k["cost_s"] for k in kills_out]
    ups = [k["up_s"] for k in kills_out]
    meanwhile = min(k["batch_steps_meanwhile"] for k in kills_out)
    print(
        f"N={n:4d} single-member restart: usual batch step {usual * 1e3:.1f} ms | job up again "
        f"in {max(ups):.2f} s (max of {kills}), {meanwhile}+ batch steps meanwhile | cost "
        f"{np.median(costs):.3f} s of actor time (median)",
        flush=True,
    )
    return {
        "copies": n,
        "usual_step_s": usual,
        "kills": kills_out,
        "cost_s": float(np.median(costs)),
    }


def single_copy_steps(steps: int, ranks: int, grid: int) -> dict[str, float]:
    """Median and lognormal shape of one copy's step wall time (seconds)."""
    env, _ = build(1, ranks, grid, seed=0)
    actions = np.zeros((1, 4), np.float32)
    walls = []
    try:
        for _ in range(10):
            env.step(actions)
        for _ in range(steps):
            t0 = time.perf_counter()
            env.step(actions)
            walls.append(time.perf_counter() - t0)
    finally:
        env.close()
    logs = np.log(walls)
    return {"median_s": float(np.exp(np.median(logs))), "sigma": float(np.std(logs))}


def member_cost_at(b: int, members: list[dict[str, Any]]) -> float:
    """Actor seconds one single-member restart costs at ``b`` copies: interpolated between the
    measured sizes, scaled linearly beyond the largest (the usual batch step grows with b)."""
    sizes = [r["copies"] for r in members]
    costs = [r["cost_s"] for r in members]
    if b > sizes[-1]:
        return costs[-1] * b / sizes[-1]
    return float(np.interp(b, sizes, costs))


def rebuild_at(b: int, rows: list[dict[str, Any]]) -> float:
    """Seconds to rebuild a batch env of ``b`` jobs: interpolated between the measured sizes,
    scaled linearly beyond the largest."""
    sizes = [r["copies"] for r in rows]
    times = [float(np.median(r["rebuild_s"] or [r["startup_s"]])) for r in rows]
    if b > sizes[-1]:
        return times[-1] * b / sizes[-1]
    return float(np.interp(b, sizes, times))


def project(
    single: dict[str, float],
    rows: list[dict[str, Any]],
    total: int,
    per_actor: list[int],
    mtbf_h: float,
    nodes: int,
    horizon_s: float,
    members: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The scheduler simulator at ``total`` simulations, per batch size (module docstring); the
    simulated time is ``horizon_s`` or less, so that each run stays near :data:`MAX_EVENTS`."""
    from mtrl.plugins import load_plugins
    from mtrl.scheduler import get_policy
    from mtrl.scheduler.sim.simulator import SimConfig, simulate
    from mtrl.scheduler.sim.tasks import TaskModel

    policy = get_policy("balanced", load_plugins())
    unroll = 20
    out = []
    for b in per_actor:
        task = TaskModel(
            name="heat2d",
            step_cost_s=single["median_s"],
            sigma=single["sigma"],
            failure_prob=float(-np.expm1(-b * unroll * single["median_s"] / (mtbf_h * 3600))),
        )
        actors = total // b
        # About one event per unroll: bound the simulated time so a projection of cheap steps
        # stays within MAX_EVENTS (~65k events/s on one core here).
        unroll_s = unroll * single["median_s"] * np.exp(single["sigma"] ** 2 / 2)
        horizon = min(horizon_s, MAX_EVENTS * unroll_s / actors)
        cfg = SimConfig(
            num_actors=actors,
            horizon_s=horizon,
            rebalance_every_s=30.0,
            unroll_length=unroll,
            envs_per_actor=b,
            restart_delay_s=member_cost_at(b, members) if members else rebuild_at(b, rows),
            nodes=min(nodes, actors),
            seed=0,
        )
        res = simulate([task], cfg, policy)
        row = {
            "restart": "member" if members else "batch",
            "copies_per_actor": b,
            "actors": actors,
            "restart_s": cfg.restart_delay_s,
            "unroll_failure_prob": task.failure_prob,
            "utilisation": res.utilisation,
            "lost": res.lost,
            "horizon_s": horizon,
            "env_steps_per_s": res.env_steps / horizon,
            "failures": res.failures,
        }
        out.append(row)
        print(
            f"projection ({row['restart']} restart) {total} simulations, {b:4d} per actor "
            f"({actors} actors): restart "
            f"{cfg.restart_delay_s:5.1f} s, unroll crash {task.failure_prob:.1e} | utilisation "
            f"{res.utilisation:.1%} | lost to restarts {res.lost.get('restarting', 0.0):.1%} | "
            f"{row['env_steps_per_s']:,.0f} env steps/s",
            flush=True,
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", default="32,64,128,256")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--grid", type=int, default=16)
    parser.add_argument("--single-steps", type=int, default=300)
    parser.add_argument("--project", type=int, default=10_000)
    parser.add_argument("--per-actor", default="1,8,32,128")
    parser.add_argument("--mtbf-h", type=float, default=1.0, help="hours between a job's crashes")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--horizon-s", type=float, default=300.0)
    parser.add_argument("--results-dir", type=Path)
    parser.add_argument(
        "--member-kills", type=int, default=3, help="kills per N with single-member restart"
    )
    args = parser.parse_args()
    if ENV not in get_plugins().envs:
        print(f"{ENV} is not installed: pip install ./plugins_contrib/mtrl-heat", file=sys.stderr)
        return 2
    rows = [
        measure(int(n), args.steps, args.kills, args.ranks, args.grid)
        for n in args.copies.split(",")
    ]
    members = (
        [
            measure_members(int(n), args.member_kills, args.ranks, args.grid)
            for n in args.copies.split(",")
        ]
        if args.member_kills > 0
        else []
    )
    single = single_copy_steps(args.single_steps, args.ranks, args.grid)
    print(f"one copy: median step {single['median_s'] * 1e3:.2f} ms, sigma {single['sigma']:.2f}")
    per_actor = [int(b) for b in args.per_actor.split(",")]
    projection = project(
        single, rows, args.project, per_actor, args.mtbf_h, args.nodes, args.horizon_s
    )
    if members:
        projection += project(
            single,
            rows,
            args.project,
            per_actor,
            args.mtbf_h,
            args.nodes,
            args.horizon_s,
            members,
        )
    payload = {
        "machine": machine(),
        "args": vars(args),
        "rows": rows,
        "single_copy_step": single,
        "member_restart": members,
        "projection": projection,
    }
    path = write_result("ensemble_scale", payload, args.results_dir)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
