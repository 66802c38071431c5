"""mtrl against PufferLib's own trainer on PufferLib's own env: Ocean's C CartPole.

Both sides run in the ``pufferlib_ocean`` peer venv (PufferLib 3.0.0 built with its C envs, mtrl
and plugins_contrib/mtrl-pufferlib beside it; ``venvs.py`` builds it) with the benchmark's
matched network (a shared tanh MLP 4→64→64 with linear heads, 4,675 parameters; see
``run.py``), taking turns seed by seed, each for ``--seconds`` of training:

* **mtrl**: ``mtrl_driver.py --env ocean`` (``pufferlib/cartpole``), serial actor, 32 envs,
  unroll 20, one unroll of each per update, as ``run.py``'s ``mtrl_serial_32``;
* **PufferLib**: ``pufferlib_driver.py --env ocean``, pufferl's PPO on the same C env
  vectorised natively (32 envs × horizon 32), CleanRL's CartPole settings, as ``run.py``'s
  ``puffer_ppo_serial_32``.

Figures per side: env steps/s over the measured window, and the first time the recent mean
return reaches the target (192 steps: 190 in mtrl's count, 191 in PufferLib's; the drivers say
why), in env steps and seconds. Writes ``docs/results/peers_ocean_cartpole.json``.

    .venv/bin/python benchmarks/peers/ocean_cartpole.py [--seeds 3] [--seconds 20]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _common import machine, write_result  # noqa: E402
from run import run_one  # noqa: E402
from sample_efficiency import _fmt, spread  # noqa: E402
from venvs import ensure, python_of  # noqa: E402

print = functools.partial(print, flush=True)

VENV = "pufferlib_ocean"
#: side -> (driver's peer, its arguments, what it is)
SIDES: dict[str, tuple[str, list[str], str]] = {
    "mtrl_serial_32": (
        "mtrl",
        ["--env", "ocean", "--mode", "serial", "--envs", "32", "--batch", "32"],
        "mtrl IMPALA, serial actor, 32 envs, unroll 20, batch 32 unrolls (640 steps/update)",
    ),
    "puffer_ppo_32": (
        "pufferlib",
        ["--env", "ocean", "--envs", "32", "--horizon", "32"],
        "PufferLib 3.0.0 pufferl PPO, native C vectorisation, 32 envs x horizon 32, 4 epochs "
        "x 4 minibatches, Adam 2.5e-4",
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=2.0, help="training seconds not measured")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    ensure(VENV)
    python = str(python_of(VENV))
    out: dict[str, Any] = {
        "machine": machine(),
        "env": "PufferLib Ocean CartPole (C), 200-step episodes",
        "seconds_per_run": a.seconds,
        "sides": {k: v[2] for k, v in SIDES.items()},
        "runs": {k: [] for k in SIDES},
    }
    t0 = time.perf_counter()
    for seed in range(a.seeds):
        for name, (peer, args, _) in SIDES.items():
            load = os.getloadavg()[0]
            r = run_one(peer, [*args, "--seed", str(seed)], a.warmup, a.seconds, python)
            r.update(seed=seed, load_avg_1min_before=load)
            if "env_steps" in r and r.get("seconds"):
                r["env_steps_per_s"] = r["env_steps"] / r["seconds"]
            out["runs"][name].append(r)
            s = r.get("solved_at")
            got = f"{s['env_steps'] / 1e3:,.0f}k steps, {s['seconds']:.1f} s" if s else "—"
            sps = r.get("env_steps_per_s")
            rate = f"{sps / 1e3:,.1f}k steps/s" if sps else r.get("error", "?")
            print(f"{name} seed {seed}: {rate}; target at {got}; end {r.get('mean_return')}")
    out["total_wall_s"] = time.perf_counter() - t0
    summary = {}
    for name, runs in out["runs"].items():
        hit = [r["solved_at"] for r in runs if r.get("solved_at")]
        summary[name] = {
            "seeds": len(runs),
            "reached": len(hit),
            "env_steps_per_s": spread(
                [r["env_steps_per_s"] for r in runs if "env_steps_per_s" in r]
            ),
            "steps_to_target": spread([h["env_steps"] for h in hit]),
            "seconds_to_target": spread([h["seconds"] for h in hit]),
        }
    out["summary"] = summary
    rates = [summary[k]["env_steps_per_s"] for k in SIDES]
    if all(rates):
        out["sps_ratio_mtrl_over_pufferlib"] = rates[0]["median"] / rates[1]["median"]
    print("\n| side | env steps/s | reached | env steps to target | seconds to target |")
    print("|---|---|---:|---|---|")
    for name, s in summary.items():
        rate, steps = _fmt(s["env_steps_per_s"], 1e3, "k"), _fmt(s["steps_to_target"], 1e3, "k")
        secs = _fmt(s["seconds_to_target"], f=".1f")
        print(f"| {name} | {rate} | {s['reached']}/{s['seeds']} | {steps} | {secs} s |")
    print(f"{out['total_wall_s']:.0f} s in all")
    if not a.no_write:
        print(f"written to {write_result('peers_ocean_cartpole', out)}")


if __name__ == "__main__":
    main()
