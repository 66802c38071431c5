"""What coupling an external simulation costs (docs/COUPLING.md, section 10).

(1) Per-step overhead: the drift physics of ``tests/external/drift_sim.py`` stepped in this
process (the physics alone) against the same physics behind the coupling protocol, through the
Python client and through its C twin (``drift_sim.c``, C client), for 1 and 16 copies per step.
The difference is the coupling's cost per batch step: the env's bookkeeping, two ZeroMQ
messages, and the client's decoding. It is then put beside a realistic step: ``heat/heat2d``
(the C + MPI heat code of plugins_contrib/mtrl-heat, 32x32 grid, one rank).

(2) Throughput of ``heat/heat2d`` with 1, 2 and 4 MPI ranks per simulation and with 1, 2 and 4
simulations at once (the batch of 8 copies split over them, stepped concurrently).

(3) ``--security`` (instead of (1) and (2)): what CURVE costs. The drift simulation over tcp
loopback, launched with CURVE (the default for ``transport="tcp"``: mtrl makes a key pair per
process, docs/COUPLING.md section 2) and with ``insecure: true`` (plain tcp), through the
Python and the C client, for 1 and 16 copies. Both envs of a pair are open at once and timed in
alternating blocks, so the load of a shared machine falls on both alike; the ratio CURVE/plain
of µs per batch step is taken within each pass. Each env's socket is checked to speak the
mechanism it is named for.

Every figure is measured in ``--passes`` passes of the whole set (default 3) and reported as
the median with its min-max over the passes: single passes on a shared 2-core machine varied
by 2x.

Usage: ``python benchmarks/coupling.py [--steps 2000] [--heat-steps 200] [--passes 3]
[--security] [--results-dir DIR]``. Writes ``coupling.json`` (``coupling_security.json`` with
``--security``) in ``docs/results`` or DIR. Measures speed: run it alone.
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


def _time_side_by_side(steps_of: dict[str, Any], n: int, steps: int) -> dict[str, float]:
    """µs per step of each step function: the median of 5 blocks each, the functions' blocks
    alternating (a change of load between blocks falls on all of them)."""
    actions = np.zeros((n, 1), np.float32)
    for step in steps_of.values():
        for _ in range(min(steps // 10, 100)):
            step(actions)
    blocks: dict[str, list[float]] = {name: [] for name in steps_of}
    for _ in range(5):
        for name, step in steps_of.items():
            t0 = time.perf_counter()
            for _ in range(steps // 5):
                step(actions)
            blocks[name].append((time.perf_counter() - t0) / (steps // 5) * 1e6)
    return {name: float(np.median(b)) for name, b in blocks.items()}


def _time_steps(step, n: int, steps: int) -> float:
    """Median of 5 blocks of µs per step."""
    return _time_side_by_side({"step": step}, n, steps)["step"]


def _clients() -> list[tuple[str, str]]:
    """(label, command) of the drift simulation behind the Python client and the C client."""
    c_exe = cbuild.build([DRIFT_C], "drift_sim")
    return [
        ("python_client", f"{{python}} {DRIFT_PY} {{address}}"),
        ("c_client", f"{c_exe} {{address}}"),
    ]


def overhead(steps: int) -> dict[str, Any]:
    drift = _drift_module()
    clients = _clients()
    out: dict[str, Any] = {}
    for n in (1, 16):
        sim = drift.Drift("none", 0)
        sim.hello(n, 0)
        sim.reset()
        mask = np.zeros(n, bool)
        inproc = _time_steps(lambda a, sim=sim, mask=mask: sim.step(a, mask), n, steps)
        row = {"in_process_us": inproc}
        for label, cmd in clients:
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


def _mechanism(env: Any) -> str:
    """The security mechanism mtrl's socket to the (first) simulation speaks: CURVE or NULL."""
    import zmq

    return zmq.constants.SecurityMechanism(env._links[0].sock.getsockopt(zmq.MECHANISM)).name


def security(steps: int) -> dict[str, float]:
    """(3): µs per batch step over tcp loopback with CURVE and plain, and their ratio (flat
    keys), for each client and 1 and 16 copies."""
    out: dict[str, float] = {}
    for label, cmd in _clients():
        for n in (1, 16):
            envs: dict[str, Any] = {}
            try:
                envs["curve"] = ExternalSim(command=cmd, transport="tcp")(num_envs=n, seed=0)
                plain = ExternalSim(command=cmd, transport="tcp", insecure=True)
                envs["plain"] = plain(num_envs=n, seed=0)
                for name, env in envs.items():
                    want, got = ("CURVE" if name == "curve" else "NULL"), _mechanism(env)
                    if got != want:
                        raise RuntimeError(f"the {name} env's socket speaks {got}, not {want}")
                    env.reset()
                us = _time_side_by_side({k: e.step for k, e in envs.items()}, n, steps)
            finally:
                for env in envs.values():
                    env.close()
            key = f"num_envs={n}/{label}"
            ratio = us["curve"] / us["plain"]
            out.update({f"{key}/curve_us": us["curve"], f"{key}/plain_us": us["plain"]})
            out[f"{key}/curve_over_plain"] = ratio
            print(
                f"drift over tcp loopback, {label:13s} {n:2d} copies: CURVE {us['curve']:7.1f} µs"
                f" | plain (insecure) {us['plain']:7.1f} µs | CURVE/plain {ratio:.2f}"
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
    ap.add_argument(
        "--security",
        action="store_true",
        help="only (3): tcp loopback with CURVE beside insecure: true, per client",
    )
    ap.add_argument(
        "--results-dir", type=Path, default=None, help="where the JSON goes (docs/results)"
    )
    args = ap.parse_args()
    passes = []
    for k in range(args.passes):
        print(f"-- pass {k + 1} of {args.passes}")
        if args.security:
            passes.append(security(args.steps))
        else:
            passes.append(one_pass(args.steps, args.heat_steps))
    figures = {key: _spread([p[key] for p in passes]) for key in passes[0]}
    result: dict[str, Any] = {"machine": machine(), "passes": args.passes, "figures": figures}
    print(f"-- medians over {args.passes} passes (min-max)")
    for key, f in figures.items():
        print(f"{key:55s} {f['median']:10.2f}  ({f['min']:.2f}-{f['max']:.2f})")
    if args.security:
        name = "coupling_security"
    else:
        name = "coupling"
        c_over = figures["num_envs=1/overhead_c_us"]["median"]
        heat_us = figures["heat2d_one_copy_one_rank_step_us"]["median"]
        result["overhead_share_of_heat2d_step"] = c_over / heat_us
        print(
            f"heat2d (32x32, 1 copy, 1 rank): {heat_us:.0f} µs per step, of which the coupling "
            f"(C client) is ~{c_over:.0f} µs = {100 * c_over / heat_us:.0f}%"
        )
    print(f"wrote {write_result(name, result, args.results_dir)}")


if __name__ == "__main__":
    main()
