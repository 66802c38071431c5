"""The scheduler on a real run: data shares under ``fixed`` vs ``balanced``, and ``progress``
moving actors off a solved task.

Part 1 trains three tasks whose env steps cost ~10x apart plus one with heavy-tailed random
step times (the contrib simulations), with process actors, under ``fixed``, ``balanced`` with
actor moves only (``share_gate: false``) and ``balanced`` (with the share gate), and reports
each task's share of the env steps the learner consumed after warm-up against its weight.
Part 2 trains CartPole (solved fast) beside harder tasks under ``progress`` and reports the
actors per task over time.

Usage: ``python benchmarks/scheduler_live.py [--seconds 90] [--part 1 2]``.
Writes ``docs/results/scheduler_live.json``.
"""

from __future__ import annotations

import argparse
import builtins
import functools
import json
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

from mtrl.config import parse_config
from mtrl.train.trainer import Trainer

print = functools.partial(builtins.print, flush=True)

COST_TASKS = """
  - {env: scisim/heat1d, name: heat-n128, num_envs: 8, env_kwargs: {n: 128}}
  - {env: scisim/heat1d, name: heat-n512, num_envs: 8, env_kwargs: {n: 512}}
  - {env: scisim/heat1d, name: heat-n2048, num_envs: 8, env_kwargs: {n: 2048}}
  - {env: scisim/epidemic, name: epidemic-gillespie, num_envs: 8,
     env_kwargs: {population: 20000, method: gillespie}}
"""

PROGRESS_TASKS = """
  - {env: gymnasium/CartPole-v1, num_envs: 16, target_score: 200}
  - {env: minatar/breakout, num_envs: 16, target_score: 10}
  - {env: minatar/space_invaders, num_envs: 16, target_score: 100}
"""


def _run(
    tasks: str, policy: str, actors: int, seconds: float, run_dir: str, gate: bool = True
) -> list[dict]:
    cfg = parse_config(
        textwrap.dedent(
            f"""\
            name: sched-{policy}
            total_env_steps: 1000000000
            scheduler: {{policy: {policy}, num_actors: {actors}, rebalance_every_s: 5,
                         warmup_s: 5, share_gate: {str(gate).lower()}}}
            actors: {{mode: process}}
            learner: {{batch_size: 32, model: {{encoder_dim: 64, torso: [64]}}}}
            checkpoint: {{enabled: false}}
            tracking: {{run_dir: {run_dir}, log_every_s: 2, console: quiet, csv: false,
                        wandb: {{mode: disabled}}}}
            """
        )
        + "tasks:"
        + tasks
    )
    trainer = Trainer(cfg, console=False)
    import threading

    timer = threading.Timer(seconds, trainer.request_stop)
    timer.start()
    try:
        trainer.run()
    finally:
        timer.cancel()
        trainer.close()
    return [json.loads(x) for x in (trainer.run_dir / "metrics.jsonl").open()]


def _shares(records: list[dict], names: list[str], after_s: float) -> dict[str, Any]:
    """Share of consumed env steps per task between ``after_s`` and the end."""
    window = [r for r in records if r["charts/elapsed_s"] >= after_s]
    first, last = window[0], window[-1]
    steps = {n: last[f"task/{n}/env_steps"] - first[f"task/{n}/env_steps"] for n in names}
    total = sum(steps.values()) or 1
    lag = [r["charts/policy_lag"] for r in window if r.get("charts/policy_lag") is not None]
    return {
        "share": {n: steps[n] / total for n in names},
        "actors_end": {n: last.get(f"scheduler/{n}/actors") for n in names},
        "env_steps": steps,
        "env_steps_per_s": total / (last["charts/elapsed_s"] - first["charts/elapsed_s"]),
        "policy_lag_mean": sum(lag) / len(lag) if lag else None,
    }


def part1(seconds: float, tmp: str) -> dict[str, Any]:
    names = ["heat-n128", "heat-n512", "heat-n2048", "epidemic-gillespie"]
    out = {}
    runs = [("fixed", "fixed", True), ("balanced_no_gate", "balanced", False)]
    runs.append(("balanced", "balanced", True))
    for label, policy, gate in runs:
        records = _run(COST_TASKS, policy, 12, seconds, tmp, gate=gate)
        res = _shares(records, names, after_s=seconds / 3)
        res["max_rel_error_vs_weight"] = max(abs(s * len(names) - 1) for s in res["share"].values())
        out[label] = res
        print(f"{label:17s} " + "  ".join(f"{n} {s:.1%}" for n, s in res["share"].items()))
        print(
            f"{'':17s} actors at end {res['actors_end']}  "
            f"max |share/weight - 1| = {res['max_rel_error_vs_weight']:.2f}  "
            f"{res['env_steps_per_s']:,.0f} env steps/s  policy lag {res['policy_lag_mean']}"
        )
    return out


def part2(seconds: float, tmp: str) -> dict[str, Any]:
    names = ["gymnasium/CartPole-v1", "minatar/breakout", "minatar/space_invaders"]
    records = _run(PROGRESS_TASKS, "progress", 6, seconds, tmp)
    timeline = [
        {
            "t": round(r["charts/elapsed_s"], 1),
            **{n: r.get(f"scheduler/{n}/actors") for n in names},
            **{f"{n} return": r.get(f"task/{n}/return") for n in names},
        }
        for r in records
    ]
    for row in timeline[:: max(1, len(timeline) // 12)]:
        print(row)
    return {"timeline": timeline}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--part", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    out: dict[str, Any] = {"machine": machine(), "seconds": args.seconds}
    with tempfile.TemporaryDirectory() as tmp:
        if 1 in args.part:
            out["part1_shares"] = part1(args.seconds, tmp)
        if 2 in args.part:
            out["part2_progress"] = part2(args.seconds, tmp)
    print(f"written to {write_result('scheduler_live', out)}")


if __name__ == "__main__":
    main()
