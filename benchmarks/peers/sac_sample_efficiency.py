"""Sample efficiency of SAC: env steps and seconds to a target return, against SB3 and IMPALA.

Three sides take turns, seed by seed, on the same env:

* **SB3 SAC** out of the box (``sb3_sac_driver.py`` in the ``sb3_mujoco`` peer venv: one env,
  two hidden layers of 256, one gradient step of 256 per env step from the 100th, lr 3e-4);
* **mtrl SAC**, ``configs/sac_inverted_pendulum.yaml``: the same settings and network depth
  (``learner.algorithm: sac``, serial actor, one env);
* **mtrl IMPALA** on the same network (``learner.algorithm: impala``, serial actor, 8 envs,
  8 unrolls of 20 per update: the on-policy rule's usual setting, not one env);
* on request (``--sides ...,sac_host_defaults``), **mtrl SAC with the actor-critic's learner
  defaults** in place of SAC's own (two encoder layers and a two-layer torso of 256, updates
  on 32 columns of 20 steps): what a config that leaves them out got before SAC brought its
  own, so ``--env Pendulum-v1`` (every default on every side) measures what they changed.

mtrl's sides run through ``benchmarks/learning.py`` (``stop_at_target``, then the final
checkpoint's greedy eval); SB3's driver stops the same way (the mean of the last 20 training
episodes at the target) and plays the final agent greedily. "Seconds" are training seconds to
the target: SB3's from the start of ``learn``, mtrl's from the run's start (actor start-up
included). Torch on one thread on every side.

Usage::

    .venv/bin/python benchmarks/peers/sac_sample_efficiency.py [--seeds 3] [--sides sb3,sac,impala]
    .venv/bin/python benchmarks/peers/sac_sample_efficiency.py --env HalfCheetah-v5 ...
    .venv/bin/python benchmarks/peers/sac_sample_efficiency.py --env heat1d ...  # scisim/heat1d
    # two calls side by side, one core each, then one result from both:
    ... --first-seed 0 --seeds 1 --name part_a &  ... --first-seed 1 --seeds 1 --name part_b
    .venv/bin/python benchmarks/peers/sac_sample_efficiency.py --merge part_a part_b --name NAME

Writes ``docs/results/peers_sac_sample_efficiency[_halfcheetah|_heat1d].json``. The issue's targets:
mtrl SAC's median env steps to the target at most 1/5 of IMPALA's and no more than SB3 SAC's,
in no more wall time than SB3.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _common import RESULTS, machine, write_result  # noqa: E402
from sample_efficiency import _fmt, spread  # noqa: E402
from venvs import ensure, python_of  # noqa: E402

print = functools.partial(print, flush=True)

PEER_VENV = "sb3_mujoco"


@dataclass(frozen=True)
class Env:
    """One env of the comparison: its ids, target and step budgets."""

    gym_id: str
    config: Path
    target: float
    sac_max_steps: int
    impala_max_steps: int
    impala_sets: list[str] = field(default_factory=list)
    peer: str = PEER_VENV  # SB3's venv (sb3_mtrl for an mtrl env: mtrl and its plugin in it)
    sets: list[str] = field(default_factory=list)  # for both rules (the setup as measured)


ENVS: dict[str, Env] = {
    "InvertedPendulum-v5": Env(
        "InvertedPendulum-v5",
        ROOT / "configs" / "sac_inverted_pendulum.yaml",
        950.0,
        50_000,
        500_000,
        ["tasks.0.num_envs=8", "learner.batch_size=8", "learner.unroll_length=20"],
    ),
    "Pendulum-v1": Env(  # every default on both sides: what a user meets first
        "Pendulum-v1",
        ROOT / "benchmarks" / "configs" / "sac_pendulum_defaults.yaml",
        -250.0,
        20_000,
        500_000,
        ["tasks.0.num_envs=8", "learner.batch_size=8", "learner.unroll_length=20"],
    ),
    "HalfCheetah-v5": Env(
        "HalfCheetah-v5",
        ROOT / "configs" / "sac_half_cheetah.yaml",
        3000.0,
        150_000,
        3_000_000,
        ["tasks.0.num_envs=8", "learner.batch_size=8", "learner.unroll_length=20"],
    ),
    "heat1d": Env(
        "scisim/heat1d",
        ROOT / "configs" / "sac_heat1d.yaml",
        -10.0,
        100_000,
        2_000_000,
        ["tasks.0.num_envs=8", "learner.batch_size=8", "learner.unroll_length=20"],
        peer="sb3_mtrl",
        sets=["actors.mode=serial"],  # the config's process actors restart a crashed env
    ),
}


def run_sb3(env: Env, seed: int, eval_episodes: int) -> dict[str, Any]:
    """One SB3 SAC seed: the driver's JSON line, or an ``error``."""
    cmd = [
        str(python_of(env.peer)),
        str(HERE / "sb3_sac_driver.py"),
        f"--env={env.gym_id}",
        f"--target={env.target}",
        f"--max-steps={env.sac_max_steps}",
        f"--eval-episodes={eval_episodes}",
        f"--seed={seed}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            out = json.loads(line)
            reached = out.get("reached")
            return {
                "seed": seed,
                "env_steps": out["env_steps"],
                "steps_to_target": reached["env_steps"] if reached else None,
                "seconds_to_target": reached["seconds"] if reached else None,
                "final": out["final_return"],
                "greedy": statistics.mean(out["greedy_returns"]),
                "train_s": out["train_s"],
                "versions": out["versions"],
            }
    return {"seed": seed, "error": f"exit {proc.returncode}: {(proc.stderr or '')[-1500:]}"}


#: The actor-critic's learner defaults, set explicitly: the ``sac_host_defaults`` side.
HOST_DEFAULTS = [
    "learner.model.encoder_layers=2",
    "learner.model.torso=[256, 256]",
    "learner.unroll_length=20",
    "learner.batch_size=32",
]


def run_mtrl(env: Env, seed: int, eval_episodes: int, side: str, work: Path) -> dict[str, Any]:
    """One mtrl seed of ``side`` (``sac``, ``sac_host_defaults`` or ``impala``) through
    ``benchmarks/learning.py``: its per-task figures, or an ``error``."""
    name = f"sacse_{side}_{seed}"
    by_side = {"sac": [], "sac_host_defaults": HOST_DEFAULTS}
    impala = ["learner.algorithm=impala", *env.impala_sets]
    sets = env.sets + by_side.get(side, impala)
    steps = env.sac_max_steps if side in by_side else env.impala_max_steps
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "learning.py"),
        str(env.config),
        f"--seed-list={seed}",
        f"--eval-episodes={eval_episodes}",
        f"--total-env-steps={steps}",
        f"--name={name}",
        f"--out-dir={work}",
        f"--work-dir={work / name}",
    ]
    for s in sets:
        cmd += ["--set", s]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    path = work / f"learning_{name}.json"
    if not path.is_file():
        return {"seed": seed, "error": f"exit {proc.returncode}: {proc.stderr[-1500:]}"}
    run = json.loads(path.read_text())["runs"][0]
    if run.get("error"):
        return {"seed": seed, "error": run["error"]}
    task = next(iter(run["tasks"].values()))
    return {
        "seed": seed,
        "env_steps": run["env_steps"],
        "steps_to_target": task["steps_to_target"],
        "seconds_to_target": task["seconds_to_target"],
        "final": task["final"],
        "greedy": task["greedy"],
        "train_s": run["train_wall_s"],
        "overrides": sets,
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per side: seeds that reached the target, steps and seconds to it, greedy returns."""
    ok = [r for r in runs if "error" not in r]
    hit = [r for r in ok if r["steps_to_target"] is not None]
    return {
        "seeds": len(runs),
        "errors": len(runs) - len(ok),
        "reached": len(hit),
        "steps_to_target": spread([r["steps_to_target"] for r in hit]),
        "seconds_to_target": spread([r["seconds_to_target"] for r in hit]),
        "greedy": spread([r["greedy"] for r in ok]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", choices=sorted(ENVS), default="InvertedPendulum-v5")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds first-seed … first-seed + seeds - 1 (two calls with --name can split them)",
    )
    ap.add_argument(
        "--sides",
        default="sb3,sac,impala",
        help="comma-separated, of sb3, sac, impala, sac_host_defaults",
    )
    ap.add_argument("--eval-episodes", type=int, default=10)
    ap.add_argument("--no-write", action="store_true", help="do not write docs/results")
    ap.add_argument(
        "--name",
        help="result name (default peers_sac_sample_efficiency, with _<env> for other envs "
        "than InvertedPendulum): lets two calls run their sides side by side, one core each",
    )
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="NAME",
        help="instead of running: merge these results (of calls with --name) into --name's",
    )
    a = ap.parse_args()
    if a.merge:
        merge(a.merge, a.name)
        return
    env = ENVS[a.env]
    sides = [s.strip() for s in a.sides.split(",") if s.strip()]
    if "sb3" in sides:
        ensure(env.peer)
    out: dict[str, Any] = {
        "machine": machine(),
        "env": env.gym_id,
        "target": env.target,
        "config": str(env.config.relative_to(ROOT)),
        "budgets": {"sac": env.sac_max_steps, "impala": env.impala_max_steps},
        "impala_overrides": env.impala_sets,
        "runs": {s: [] for s in sides},
    }
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mtrl-sacse-") as tmp:
        for seed in range(a.first_seed, a.first_seed + a.seeds):
            for side in sides:
                load = os.getloadavg()[0]
                if side == "sb3":
                    r = run_sb3(env, seed, a.eval_episodes)
                else:
                    r = run_mtrl(env, seed, a.eval_episodes, side, Path(tmp))
                r["load_avg_1min_before"] = load
                out["runs"][side].append(r)
                got = (
                    f"{r['steps_to_target'] / 1e3:,.1f}k steps, {r['seconds_to_target']:.0f} s"
                    if r.get("steps_to_target") is not None
                    else "not reached"
                )
                print(f"{side} seed {seed}: {got}; greedy {r.get('greedy')} {r.get('error', '')}")
    out["total_wall_s"] = time.perf_counter() - t0
    report(out)
    if not a.no_write:
        print(f"written to {write_result(a.name or default_name(a.env), out)}")


def default_name(env: str) -> str:
    """The result's name: ``peers_sac_sample_efficiency``, with ``_<env>`` but for
    InvertedPendulum."""
    suffix = "" if env == "InvertedPendulum-v5" else f"_{env.split('-')[0].lower()}"
    return "peers_sac_sample_efficiency" + suffix


def report(out: dict[str, Any]) -> None:
    """Summarise ``out["runs"]`` per side into ``out["summary"]`` and print the table."""
    out["summary"] = {s: summarise(v) for s, v in out["runs"].items()}
    print(f"\n{out['env']}, target {out['target']:g}")
    print("| side | reached | env steps to target | seconds to target | greedy return |")
    print("|---|---:|---|---|---|")
    for side, s in out["summary"].items():
        steps = _fmt(s["steps_to_target"], 1e3, "k", ",.1f")
        print(
            f"| {side} | {s['reached']}/{s['seeds']} | {steps} | "
            f"{_fmt(s['seconds_to_target'], f='.0f')} s | {_fmt(s['greedy'], f='.0f')} |"
        )
    print(f"{out['total_wall_s']:.0f} s in all")


def merge(names: list[str], into: str | None) -> None:
    """One result from the calls that split the seeds or sides (``--name``), run side by side:
    their runs per side, seed order, summarised again; ``total_wall_s`` is the longest call's.
    Written as ``into``, or as the results' env's default name."""
    parts = [json.loads((RESULTS / f"{n}.json").read_text()) for n in names]
    envs = {p["env"] for p in parts}
    if len(envs) != 1:
        raise SystemExit(f"--merge: the results are of different envs: {sorted(envs)}")
    if into is None:
        into = default_name(next(k for k, e in ENVS.items() if e.gym_id in envs))
    out = {k: v for k, v in parts[0].items() if k not in ("runs", "summary", "total_wall_s")}
    out["merged_from"] = names
    out["total_wall_s"] = max(p["total_wall_s"] for p in parts)
    out["runs"] = {}
    for p in parts:
        for side, runs in p["runs"].items():
            out["runs"].setdefault(side, []).extend(runs)
    for runs in out["runs"].values():
        runs.sort(key=lambda r: r["seed"])
    report(out)
    print(f"written to {write_result(into, out)}")


if __name__ == "__main__":
    main()
