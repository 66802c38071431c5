"""Training throughput against Stable-Baselines3 PPO, Sample Factory APPO and PufferLib 3, one run.

Same env (CartPole-v1), same network (a shared tanh MLP 4→64→64 with linear policy and value
heads, 4,675 parameters; SB3's own default policy is run too, as a reference), same machine,
back to back. Each run is a subprocess of its own venv's python (peers: ``.venvs/sb3``,
``.venvs/sf``, ``.venvs/pufferlib``, built once by :mod:`venvs`; mtrl: this interpreter) driven
by a small script that prints one JSON line with the env steps and seconds of a fixed wall-time
window after a warm-up, plus the mean return of the last 20 episodes at the end and when (if) it
first reached 475, so a fast but broken learner shows.

Usage: ``.venv/bin/python benchmarks/peers/run.py [--seconds 30] [--warmup 5]
[--only NAME ...]``. Writes ``docs/results/peers.json``; targets: mtrl ≥ 5x SB3, ahead of SF,
at least PufferLib's rate.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _common import machine, write_result  # noqa: E402
from venvs import PEERS, build_seconds, ensure, python_of  # noqa: E402

print = functools.partial(print, flush=True)

LEARNS = 200.0  # mean return at the end that counts as learning (random ≈ 22, max 500)
NETWORK = (
    "shared MLP obs(4) → 64 → 64 (tanh), linear policy (2) and value (1) heads: 4,675 params. "
    "SB3: custom features extractor, share_features_extractor, net_arch []; Sample Factory: "
    "--encoder_mlp_layers 64 64 --nonlinearity tanh --use_rnn False; PufferLib: the same "
    "module in the driver; mtrl: learner.model {encoder_dim: 64, torso: [], activation: tanh}"
)


@dataclass(frozen=True)
class Run:
    """One benchmark run: a driver and its arguments."""

    name: str
    peer: str  # "sb3", "sf", "pufferlib" or "mtrl"
    args: list[str]
    what: str
    matched: bool = True  # the benchmark's network and settings (ratios use only these)


#: Peers and mtrl alternate so that load drift on the shared machine hits every side alike.
RUNS: list[Run] = [
    Run(
        "sb3_ppo_8env",
        "sb3",
        ["--envs", "8"],
        "PPO, DummyVecEnv 8 envs, n_steps 128, batch 256, 4 epochs, torch threads 1",
    ),
    Run(
        "sf_appo_2x16",
        "sf",
        ["--workers", "2", "--envs-per-worker", "16"],
        "APPO, 2 workers x 16 envs, rollout 32, batch 512, async, per-env sampling (defaults)",
    ),
    Run(
        "mtrl_serial_32",
        "mtrl",
        ["--mode", "serial", "--envs", "32", "--batch", "32"],
        "serial, 32 envs, unroll 20, batch 32 unrolls (640 steps/update)",
    ),
    Run(
        "sb3_ppo_32env",
        "sb3",
        ["--envs", "32"],
        "PPO, DummyVecEnv 32 envs, n_steps 128, batch 256, 4 epochs, torch threads 1",
    ),
    Run(
        "sf_appo_2x64_batched",
        "sf",
        ["--workers", "2", "--envs-per-worker", "64", "--batched", "--", "--batch_size=2048"],
        "APPO, 2 workers x 64 envs, batched sampling, rollout 32, batch 2048, async",
    ),
    Run(
        "mtrl_serial_128",
        "mtrl",
        ["--mode", "serial", "--envs", "128", "--batch", "128"],
        "serial, 128 envs, unroll 20, batch 128 unrolls (2,560 steps/update)",
    ),
    Run(
        "sb3_ppo_8env_default",
        "sb3",
        ["--envs", "8", "--net", "default", "--threads", "0"],
        "PPO out of the box: default MlpPolicy (separate 64-64 pi and vf, 9,155 params), "
        "8 envs, n_steps 128, batch 256, 4 epochs, torch's default threads",
        matched=False,
    ),
    Run(
        "mtrl_process_2x64",
        "mtrl",
        ["--mode", "process", "--actors", "2", "--envs", "64", "--batch", "128"],
        "process, 2 actors x 64 envs, unroll 20, batch 128 unrolls (2,560 steps/update)",
    ),
    Run(
        "puffer_ppo_serial_32",
        "pufferlib",
        ["--backend", "serial", "--envs", "32", "--horizon", "32"],
        "pufferl PPO, Serial vecenv 32 envs, horizon 32 (1,024 steps/epoch), 4 epochs x 4 "
        "minibatches, torch threads 1",
    ),
    Run(
        "puffer_ppo_serial_128",
        "pufferlib",
        ["--backend", "serial", "--envs", "128", "--horizon", "32"],
        "pufferl PPO, Serial vecenv 128 envs, horizon 32 (4,096 steps/epoch), 4 x 4",
    ),
    Run(
        "puffer_ppo_mp_2x64",
        "pufferlib",
        ["--backend", "multiprocessing", "--workers", "2", "--envs", "128", "--horizon", "32"],
        "pufferl PPO, Multiprocessing vecenv 2 workers x 64 envs, horizon 32, 4 x 4",
    ),
    Run(
        "mtrl_serial_256",
        "mtrl",
        ["--mode", "serial", "--envs", "256", "--batch", "256", "--lr", "0.001"],
        "serial, 256 envs, unroll 20, batch 256 unrolls (5,120 steps/update), lr 1e-3",
    ),
]

#: Pairs compared as they stand, whatever the best runs are.
LIKE_FOR_LIKE = [
    ("mtrl_serial_32", "sb3_ppo_8env"),
    ("mtrl_serial_32", "sf_appo_2x16"),
    ("mtrl_serial_32", "puffer_ppo_serial_32"),
]

DRIVERS = {
    "sb3": "sb3_driver.py",
    "sf": "sf_driver.py",
    "pufferlib": "pufferlib_driver.py",
    "mtrl": "mtrl_driver.py",
}
PEER_NAMES = ("sb3", "sf", "pufferlib")


def _python(peer: str) -> str:
    return sys.executable if peer == "mtrl" else str(python_of(peer))


def run_one(
    peer: str, args: list[str], warmup: float, seconds: float, python: str | None = None
) -> dict[str, Any]:
    """Run one driver (``peer``'s, in ``python``, by default the peer's venv); its result
    (the last JSON line it printed) or an ``error``."""
    cmd = [python or _python(peer), str(HERE / DRIVERS[peer]), "--warmup", str(warmup)]
    cmd += ["--seconds", str(seconds), *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WANDB_MODE": "disabled"}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=warmup + seconds + 180, env=env
        )
    except subprocess.TimeoutExpired as e:
        return {"error": f"timed out after {e.timeout:.0f} s"}
    wall = time.perf_counter() - t0
    for line in reversed(proc.stdout.splitlines()):
        line = line.removeprefix("PEER_RESULT ").strip()
        if line.startswith("{"):
            out = json.loads(line)
            out["process_wall_s"] = wall
            return out
    tail = (proc.stdout + proc.stderr)[-2000:]
    return {"error": f"exit {proc.returncode}, no result line", "log_tail": tail}


def _sps(r: dict[str, Any]) -> float | None:
    return r["env_steps"] / r["seconds"] if "env_steps" in r and r["seconds"] > 0 else None


def _best(rows: dict[str, dict[str, Any]], peer: str) -> str | None:
    """The run a ratio uses: for mtrl its fastest run that learns; for a peer its fastest
    matched run, learning or not (the conservative choice for the ratios)."""
    pool = {k: r for k, r in rows.items() if r["peer"] == peer and r.get("sps") and r["matched"]}
    if peer == "mtrl":
        pool = {k: r for k, r in pool.items() if r["learns"]}
    return max(pool, key=lambda k: pool[k]["sps"]) if pool else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="measured window per run")
    ap.add_argument("--warmup", type=float, default=5.0, help="training seconds not measured")
    ap.add_argument("--only", nargs="+", default=None, help="run names to run (default: all)")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/results")
    a = ap.parse_args()
    runs = [r for r in RUNS if a.only is None or r.name in a.only]
    t_check = time.perf_counter()
    builds = {name: ensure(name) for name in PEERS if any(r.peer == name for r in runs)}
    check_s = time.perf_counter() - t_check
    out: dict[str, Any] = {
        "machine": machine(),
        "env": "CartPole-v1 (gymnasium)",
        "network": NETWORK,
        "warmup_s": a.warmup,
        "seconds": a.seconds,
        "learns_if_mean_return_at_least": LEARNS,
        "venvs": {
            "built_in_this_run_s": builds,
            "first_build_s": {name: build_seconds(name) for name in PEERS},
            "check_s": check_s,
        },
        "runs": {},
    }
    t_all = time.perf_counter()
    for run in runs:
        load = os.getloadavg()[0]
        print(f"-- {run.name}: {run.what} (load {load:.1f})")
        r = run_one(run.peer, run.args, a.warmup, a.seconds)
        r.update(peer=run.peer, what=run.what, matched=run.matched, load_avg_1min_before=load)
        r["sps"] = _sps(r)
        r["learns"] = (r.get("mean_return") or 0.0) >= LEARNS
        out["runs"][run.name] = r
        if "error" in r:
            print(f"   FAILED: {r['error']}\n{r.get('log_tail', '')}")
        else:
            print(
                f"   {r['sps']:>10,.0f} env steps/s, mean return {r['mean_return']}, "
                f"solved at {r['solved_at']}"
            )
    out["total_wall_s"] = time.perf_counter() - t_all
    out["load_avg_1min_at_end"] = os.getloadavg()[0]
    rows = out["runs"]
    best = {p: _best(rows, p) for p in ("mtrl", *PEER_NAMES)}
    out["best"] = best
    ratios: dict[str, float | None] = {}
    if best["mtrl"]:
        m = rows[best["mtrl"]]["sps"]
        for p in PEER_NAMES:
            ratios[f"mtrl_over_{p}"] = m / rows[best[p]]["sps"] if best[p] else None
        for mine, theirs in LIKE_FOR_LIKE:
            if rows.get(mine, {}).get("sps") and rows.get(theirs, {}).get("sps"):
                ratios[f"{mine}_over_{theirs}"] = rows[mine]["sps"] / rows[theirs]["sps"]
    out["ratios"] = ratios
    out["targets"] = {
        "mtrl_over_sb3_at_least_5": (ratios.get("mtrl_over_sb3") or 0) >= 5,
        "mtrl_ahead_of_sf": (ratios.get("mtrl_over_sf") or 0) > 1,
        "mtrl_at_least_pufferlib": (ratios.get("mtrl_over_pufferlib") or 0) >= 1,
    }
    _table(out)
    if not a.no_write:
        print(f"\nwritten to {write_result('peers', out)}")


def _table(out: dict[str, Any]) -> None:
    print(
        f"\nload average before/after: {out['machine']['load_avg_1min_at_start']:.1f} / "
        f"{out['load_avg_1min_at_end']:.1f}; {out['total_wall_s']:.0f} s in all"
    )
    print("| run | env steps/s | mean return (last 20) | first ≥ 475 at | steps | load |")
    print("|---|---:|---:|---|---:|---:|")
    for name, r in out["runs"].items():
        if r.get("sps") is None:
            print(f"| {name} | failed | | | | {r['load_avg_1min_before']:.1f} |")
            continue
        s = r.get("solved_at")
        solved = f"{s['seconds']:.0f} s / {s['env_steps'] / 1e3:,.0f}k steps" if s else "—"
        ret = f"{r['mean_return']:.0f}" if r["mean_return"] is not None else "—"
        print(
            f"| {name} | {r['sps']:,.0f} | {ret} | {solved} | "
            f"{r['total_env_steps'] / 1e3:,.0f}k | {r['load_avg_1min_before']:.1f} |"
        )
    print(f"runs the ratios use (mtrl: fastest that learns; peers: fastest): {out['best']}")
    for k, v in out["ratios"].items():
        print(f"{k}: {v:.2f}x" if v is not None else f"{k}: —")
    print(f"targets: {out['targets']}")


if __name__ == "__main__":
    main()
