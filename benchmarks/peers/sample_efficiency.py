"""Sample efficiency on CartPole-v1: env steps and seconds to a 475 mean return, over seeds.

Stable-Baselines3 PPO out of the box (default MlpPolicy, 8 envs, torch's default threads),
PufferLib 3's PPO (pufferl, 8 envs × 128 steps per epoch, CleanRL's CartPole settings) and
mtrl tuned for time to the target (serial actor, 16 envs, one unroll of each per update, lr
4e-3; the benchmark's matched 4,675-parameter network) take turns, seed by seed,
each in its own venv's python through the same drivers as ``run.py``. A run stops after
``--seconds`` of training; "reached" is the first time the mean of the last 20 episodes is at
least 475, in env steps and in seconds since the first unroll.

Usage: ``.venv/bin/python benchmarks/peers/sample_efficiency.py [--seeds 5] [--seconds 40]``.
Writes ``docs/results/peers_sample_efficiency.json`` (``--name`` another file in docs/results).
Targets: mtrl's median steps to 475 no more than SB3's in the same run, and its median seconds to
475 a third of SB3's or fewer. The side ``mtrl_ppo`` is the PPO plugin
(``plugins_contrib/mtrl-ppo``, its ``configs/ppo_cartpole.yaml``; run with a python where the
plugin is installed); its target: median steps to 475 no more than SB3's PPO. Each side's
median and IQM of the steps to 475, over the seeds that reached it, come with 95% stratified
bootstrap intervals (rliable, when installed: ``mtrl[bench]``).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _common import machine, write_result  # noqa: E402
from run import run_one  # noqa: E402
from venvs import ensure  # noqa: E402

print = functools.partial(print, flush=True)

MTRL_SIDE = "mtrl_serial_16"
SB3_SIDE = "sb3_ppo_default"
PUFFER_SIDE = "pufferlib_ppo_8"
PPO_SIDE = "mtrl_ppo"
PPO_CONFIG = HERE.parents[1] / "plugins_contrib" / "mtrl-ppo" / "configs" / "ppo_cartpole.yaml"

#: name -> (peer, driver arguments, what it is)
SIDES: dict[str, tuple[str, list[str], str]] = {
    SB3_SIDE: (
        "sb3",
        ["--envs", "8", "--net", "default", "--threads", "0"],
        "SB3 PPO out of the box: default MlpPolicy (separate 64-64 pi and vf), 8 envs, "
        "n_steps 128, batch 256, 4 epochs, torch's default threads",
    ),
    PUFFER_SIDE: (
        "pufferlib",
        ["--backend", "serial", "--envs", "8", "--horizon", "128"],
        "PufferLib 3 pufferl PPO, Serial vecenv 8 envs, horizon 128 (1,024 steps/epoch), 4 "
        "epochs x 4 minibatches, Adam 2.5e-4, shared tanh MLP 4-64-64 (4,675 params)",
    ),
    # Chosen on seeds 0 and 1 from envs {8, 16} x unroll {10, 20} x lr {1e-3, 2e-3, 4e-3}
    # (docs/BENCHMARKS.md); measured on other seeds (--first-seed).
    MTRL_SIDE: (
        "mtrl",
        ["--mode", "serial", "--envs", "16", "--batch", "16", "--lr", "0.004"],
        "mtrl serial, 16 envs, unroll 20, batch 16 unrolls (320 steps/update), lr 4e-3, "
        "shared tanh MLP 4-64-64 (4,675 params)",
    ),
    PPO_SIDE: (
        "mtrl",
        ["--config", str(PPO_CONFIG)],
        "mtrl's PPO plugin (plugins_contrib/mtrl-ppo, configs/ppo_cartpole.yaml): serial actor, "
        "8 envs x 128 steps per update, 4 epochs x 4 minibatches, lr 3e-4, shared tanh MLP "
        "4-64-64 with a 64 torso layer (8,835 params)",
    ),
}


def spread(values: list[float]) -> dict[str, float] | None:
    """Median, min and max (None for no values)."""
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def intervals(values: list[float]) -> dict[str, dict[str, float]] | None:
    """Median and IQM of ``values`` with 95% stratified-bootstrap intervals (rliable); None
    without rliable or with fewer than 2 values."""
    if len(values) < 2 or importlib.util.find_spec("rliable") is None:
        return None
    import numpy as np
    from learning_stats import bootstrap
    from rliable import metrics

    runs = np.asarray(values, np.float64)[:, None]  # runs x 1 task
    points, cis = bootstrap(
        runs, lambda x: np.array([np.median(x), metrics.aggregate_iqm(x)]), 10_000, 0
    )
    return {
        key: {"point": float(points[k]), "ci_low": float(cis[0, k]), "ci_high": float(cis[1, k])}
        for k, key in enumerate(("median", "iqm"))
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per side: how many seeds reached 475, and steps and seconds to it over those seeds."""
    hit = [r["solved_at"] for r in runs if r.get("solved_at")]
    return {
        "seeds": len(runs),
        "reached": len(hit),
        "steps_to_475": spread([h["env_steps"] for h in hit]),
        "steps_to_475_intervals": intervals([h["env_steps"] for h in hit]),
        "seconds_to_475": spread([h["seconds"] for h in hit]),
        "final_mean_return": spread([r["mean_return"] for r in runs if r.get("mean_return")]),
    }


def targets(summary: dict[str, Any]) -> dict[str, bool]:
    """The targets whose sides ran: mtrl's (IMPALA) and the PPO plugin's against SB3."""
    sb3 = summary.get(SB3_SIDE)
    out: dict[str, bool] = {}

    def fewer_steps(side: dict[str, Any]) -> bool:
        both = sb3["steps_to_475"] and side["steps_to_475"]
        return bool(both and side["steps_to_475"]["median"] <= sb3["steps_to_475"]["median"])

    mine = summary.get(MTRL_SIDE)
    if sb3 and mine:
        out["mtrl_steps_at_most_sb3"] = fewer_steps(mine)
        out["mtrl_seconds_a_third_of_sb3"] = bool(
            sb3["seconds_to_475"]
            and mine["seconds_to_475"]
            and 3 * mine["seconds_to_475"]["median"] <= sb3["seconds_to_475"]["median"]
        )
        out["mtrl_reached_every_seed"] = mine["reached"] == mine["seeds"]
    ppo = summary.get(PPO_SIDE)
    if sb3 and ppo:
        out["ppo_steps_at_most_sb3"] = fewer_steps(ppo)
        out["ppo_reached_every_seed"] = ppo["reached"] == ppo["seeds"]
    return out


def _fmt(s: dict[str, float] | None, scale: float = 1.0, unit: str = "", f: str = ",.0f") -> str:
    if s is None:
        return "—"
    med, lo, hi = (format(s[k] / scale, f) for k in ("median", "min", "max"))
    return f"{med}{unit} [{lo}, {hi}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=40.0, help="training seconds per run")
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed, ... (0)")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/results")
    ap.add_argument("--name", default="peers_sample_efficiency", help="result file's name")
    ap.add_argument(
        "--sides",
        default=",".join(SIDES),
        help=f"comma-separated subset of {', '.join(SIDES)} (SB3's and mtrl's are needed for "
        "the targets)",
    )
    a = ap.parse_args()
    sides = {k: SIDES[k] for k in a.sides.split(",")}
    for peer in {peer for peer, _, _ in sides.values()} - {"mtrl"}:
        ensure(peer)
    out: dict[str, Any] = {
        "machine": machine(),
        "env": "CartPole-v1 (gymnasium)",
        "seconds_per_run": a.seconds,
        "sides": {k: v[2] for k, v in sides.items()},
        "runs": {k: [] for k in sides},
    }
    t0 = time.perf_counter()
    for seed in range(a.first_seed, a.first_seed + a.seeds):
        for name, (peer, args, _) in sides.items():
            load = os.getloadavg()[0]
            r = run_one(peer, [*args, "--seed", str(seed)], 0.0, a.seconds)
            r.update(seed=seed, load_avg_1min_before=load)
            out["runs"][name].append(r)
            s = r.get("solved_at")
            got = f"{s['env_steps'] / 1e3:,.0f}k steps, {s['seconds']:.1f} s" if s else "—"
            print(f"{name} seed {seed}: 475 at {got}; end {r.get('mean_return')} (load {load:.1f})")
    out["total_wall_s"] = time.perf_counter() - t0
    out["summary"] = {k: summarise(v) for k, v in out["runs"].items()}
    out["targets"] = targets(out["summary"])
    print("\n| side | reached 475 | env steps to 475 (median [min, max]) | seconds to 475 |")
    print("|---|---:|---|---|")
    for name, s in out["summary"].items():
        print(
            f"| {name} | {s['reached']}/{s['seeds']} | {_fmt(s['steps_to_475'], 1e3, 'k')} | "
            f"{_fmt(s['seconds_to_475'], f='.1f')} s |"
        )
    for name, s in out["summary"].items():
        ci = s["steps_to_475_intervals"]
        if ci:
            print(
                f"{name}: steps to 475 (95% bootstrap CI, rliable): "
                + "; ".join(
                    f"{k} {v['point'] / 1e3:,.0f}k [{v['ci_low'] / 1e3:,.0f}k, "
                    f"{v['ci_high'] / 1e3:,.0f}k]"
                    for k, v in ci.items()
                )
            )
    print(f"targets: {out['targets']}; {out['total_wall_s']:.0f} s in all")
    if not a.no_write:
        print(f"written to {write_result(a.name, out)}")


if __name__ == "__main__":
    main()
