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
  build the env again (what an actor restart costs: all N jobs, since one batch env is one
  actor's unit of restart).

Usage: ``python benchmarks/ensemble_scale.py [--copies 32,64,128,256] [--steps 100] [--kills 3]
[--ranks 1] [--grid 16] [--results-dir DIR]``. Writes ``ensemble_scale.json`` in
``docs/results`` or DIR. Measures speed and memory: run it alone.
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

from mtrl.plugins import get_plugins

ENV = "heat/heat2d"


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (parent links read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


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


def build(n: int, ranks: int, grid: int, seed: int) -> tuple[Any, float]:
    """A batch env of ``n`` copies, one job each, reset; and the seconds it took."""
    spec = get_plugins().envs.get(ENV)
    sim = dataclasses.replace(spec.make, copies_per_process=1)
    t0 = time.perf_counter()
    env = sim(num_envs=n, seed=seed, ranks=ranks, n=grid)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", default="32,64,128,256")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--grid", type=int, default=16)
    parser.add_argument("--results-dir", type=Path)
    args = parser.parse_args()
    if ENV not in get_plugins().envs:
        print(f"{ENV} is not installed: pip install ./plugins_contrib/mtrl-heat", file=sys.stderr)
        return 2
    rows = [
        measure(int(n), args.steps, args.kills, args.ranks, args.grid)
        for n in args.copies.split(",")
    ]
    payload = {"machine": machine(), "args": vars(args), "rows": rows}
    path = write_result("ensemble_scale", payload, args.results_dir)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
