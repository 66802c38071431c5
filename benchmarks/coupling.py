"""What coupling an external simulation costs (docs/COUPLING.md, section 10).

(1) Per-step overhead: the drift physics of ``tests/external/drift_sim.py`` stepped in this
process (the physics alone) against the same physics behind the coupling protocol, through the
Python client and through its C twin (``drift_sim.c``, C client), for 1 and 16 copies per step.
The difference is the coupling's cost per batch step: the env's bookkeeping, two ZeroMQ
messages, and the client's decoding. It is then put beside a realistic step: ``heat/heat2d``
(the C + MPI heat code of plugins_contrib/mtrl-heat, 32x32 grid, one rank).

(2) Throughput of ``heat/heat2d`` with 1, 2 and 4 MPI ranks per simulation and with 1, 2 and 4
simulations at once (the batch of 8 copies split over them, stepped concurrently).

Every figure is measured in ``--passes`` passes of the whole set (default 3) and reported as
the median with its min-max over the passes: single passes on a shared 2-core machine varied
by 2x.

Usage: ``python benchmarks/coupling.py [--steps 2000] [--heat-steps 200] [--passes 3]``.
Writes ``docs/results/coupling.json``. Measures speed: run it alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

from mtrl.coupling import cbuild
from mtrl.plugins import get_plugins
from mtrl.plugins.external import ExternalSim

ROOT = Path(__file__).resolve().parent.parent
DRIFT_PY = ROOT / "tests" / "external" / "drift_sim.py"
DRIFT_C = ROOT / "tests" / "external" / "drift_sim.c"


def _drift_module() -> Any:
    spec = importlib.util.spec_from_file_location("drift_sim", DRIFT_PY)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _time_steps(step, n: int, steps: int) -> float:
    """Median of 5 blocks of µs per step."""
    actions = np.zeros((n, 1), np.float32)
    for _ in range(min(steps // 10, 100)):
        step(actions)
    blocks = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(steps // 5):
            step(actions)
        blocks.append((time.perf_counter() - t0) / (steps // 5) * 1e6)
    return float(np.median(blocks))


def overhead(steps: int) -> dict[str, Any]:
    drift = _drift_module()
    c_exe = cbuild.build([DRIFT_C], "drift_sim")
    out: dict[str, Any] = {}
    for n in (1, 16):
        sim = drift.Drift("none", 0)
        sim.hello(n, 0)
        sim.reset()
        mask = np.zeros(n, bool)
        inproc = _time_steps(lambda a, sim=sim, mask=mask: sim.step(a, mask), n, steps)
        row = {"in_process_us": inproc}
        for label, cmd in (
            ("python_client", f"{{python}} {DRIFT_PY} {{address}}"),
            ("c_client", f"{c_exe} {{address}}"),
        ):
            env = ExternalSim(command=cmd)(num_envs=n, seed=0)
            try:
                env.reset()
                row[f"{label}_us"] = _time_steps(env.step, n, steps)
            finally:
                env.close()
        # the C client's physics costs ~nothing: its time is the coupling's overhead
        row["overhead_c_us"] = row["c_client_us"]
        row["overhead_python_us"] = row["python_client_us"] - inproc
        out[f"num_envs={n}"] = row
        print(
            f"drift, {n:2d} copies: in-process physics {inproc:7.1f} µs | external, Python "
            f"client {row['python_client_us']:7.1f} µs | external, C client "
            f"{row['c_client_us']:7.1f} µs  per batch step"
        )
    return out


def heat(num_envs: int, ranks: int, sims: int, steps: int) -> float:
    """Env steps per second of heat/heat2d (all copies counted)."""
    spec = get_plugins().envs.get("heat/heat2d")
    sim = dataclasses.replace(spec.make, copies_per_process=num_envs // sims)
    env = sim(num_envs=num_envs, seed=0, ranks=ranks)
    try:
        env.reset()
        a = np.zeros((num_envs, 4), np.float32)
        for _ in range(10):
            env.step(a)
        t0 = time.perf_counter()
        for _ in range(steps):
            env.step(a)
        return num_envs * steps / (time.perf_counter() - t0)
    finally:
        env.close()


def _spread(values: list[float]) -> dict[str, Any]:
    """Median, min and max of one figure over the passes, and the passes themselves."""
    return {
        "median": float(np.median(values)),
        "min": float(min(values)),
        "max": float(max(values)),
        "passes": values,
    }


def one_pass(steps: int, heat_steps: int) -> dict[str, float]:
    """Every figure once (flat keys)."""
    out: dict[str, float] = {}
    for n, row in overhead(steps).items():
        out.update({f"{n}/{k}": v for k, v in row.items()})
    out["heat2d_one_copy_one_rank_step_us"] = 1e6 / heat(1, 1, 1, heat_steps)
    for ranks in (1, 2, 4):
        for sims in (1, 2, 4):
            sps = heat(8, ranks, sims, heat_steps)
            out[f"heat2d_steps_per_s/ranks={ranks},simulations={sims}"] = sps
            print(f"heat2d, 8 copies, {ranks} rank(s) x {sims} simulation(s): {sps:8.0f} steps/s")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--heat-steps", type=int, default=200)
    ap.add_argument("--passes", type=int, default=3, help="repeat everything; report medians")
    args = ap.parse_args()
    passes = []
    for k in range(args.passes):
        print(f"-- pass {k + 1} of {args.passes}")
        passes.append(one_pass(args.steps, args.heat_steps))
    figures = {key: _spread([p[key] for p in passes]) for key in passes[0]}
    c_over = figures["num_envs=1/overhead_c_us"]["median"]
    heat_us = figures["heat2d_one_copy_one_rank_step_us"]["median"]
    result: dict[str, Any] = {
        "machine": machine(),
        "passes": args.passes,
        "figures": figures,
        "overhead_share_of_heat2d_step": c_over / heat_us,
    }
    print(f"-- medians over {args.passes} passes (min-max)")
    for key, f in figures.items():
        print(f"{key:55s} {f['median']:10.1f}  ({f['min']:.1f}-{f['max']:.1f})")
    print(
        f"heat2d (32x32, 1 copy, 1 rank): {heat_us:.0f} µs per step, of which the coupling "
        f"(C client) is ~{c_over:.0f} µs = {100 * c_over / heat_us:.0f}%"
    )
    print(f"wrote {write_result('coupling', result)}")


if __name__ == "__main__":
    main()
