"""Throughput cost of the recurrent core: the quickstart run with the core off and on, side by side.

    .venv/bin/python benchmarks/recurrent.py      # writes docs/results/recurrent.json

``configs/quickstart.yaml`` (CartPole, MinAtar breakout and InvertedPendulum in one model,
process actors, the default torso ``[256, 256]``) is trained for ``--seconds`` after a
``--warmup`` (actor start-up and the first updates excluded), once feed-forward and once with
``learner.model.core`` set to ``--core`` (``hidden`` 128: the default), alternating, ``--repeat``
times. The figure is env steps/s over the timed window, from the run's own metrics records, and
the ratio recurrent / feed-forward (median of the per-repeat ratios: the pairs run back to back,
so a change in the machine's load hits both). A measurement of cost, not of learning: nothing
here says the quickstart tasks need memory.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result
from _timed_trainer import TimedTrainer

from mtrl.config import ExperimentConfig, parse_config

QUICKSTART = Path(__file__).resolve().parent.parent / "configs" / "quickstart.yaml"


def config(core: str | None, mode: str, run_dir: str) -> ExperimentConfig:
    """The quickstart with ``core`` (None: feed-forward), timed by the caller, nothing saved."""
    data = yaml.safe_load(QUICKSTART.read_text())
    data["total_env_steps"] = 10**10
    data["actors"] = {"mode": mode}
    data["learner"].setdefault("model", {})["core"] = core
    data["checkpoint"] = {"enabled": False}
    data["tracking"] = {
        "run_dir": run_dir,
        "log_every_s": 1,
        "console": "quiet",
        "csv": False,
        "final_eval_episodes": 0,
        "wandb": {"mode": "disabled"},
    }
    return parse_config(yaml.safe_dump(data), "quickstart (benchmark)")


def measure(core: str | None, mode: str, seconds: float, warmup_s: float) -> dict[str, Any]:
    """Env steps/s over the window after ``warmup_s`` and the mean policy lag there."""
    with tempfile.TemporaryDirectory() as tmp:
        trainer = TimedTrainer(config(core, mode, tmp), warmup_s + seconds, console=False)
        try:
            trainer.run()
        finally:
            trainer.close()
        records = [json.loads(x) for x in (trainer.run_dir / "metrics.jsonl").open()]
    first = next(r["charts/elapsed_s"] for r in records if r["charts/env_steps"] > 0)
    window = [r for r in records if r["charts/elapsed_s"] >= first + warmup_s]
    a, b = window[0], window[-1]
    sps = (b["charts/env_steps"] - a["charts/env_steps"]) / (
        b["charts/elapsed_s"] - a["charts/elapsed_s"]
    )
    lag = [r["charts/policy_lag"] for r in window if r.get("charts/policy_lag") is not None]
    return {
        "sps": round(sps, 1),
        "seconds": round(b["charts/elapsed_s"] - a["charts/elapsed_s"], 1),
        "policy_lag_mean": round(float(np.mean(lag)), 2) if lag else None,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=25.0, help="timed window per run")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds left out per run")
    parser.add_argument("--repeat", type=int, default=2, help="feed-forward/recurrent pairs")
    parser.add_argument("--core", choices=("lstm", "gru"), default="lstm")
    parser.add_argument("--mode", choices=("process", "serial", "thread"), default="process")
    parser.add_argument("--out", type=Path, default=None, help="results folder (docs/results)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    pairs = []
    for r in range(args.repeat):
        off = measure(None, args.mode, args.seconds, args.warmup)
        on = measure(args.core, args.mode, args.seconds, args.warmup)
        pairs.append({"feed_forward": off, "recurrent": on, "ratio": on["sps"] / off["sps"]})
        print(
            f"pair {r + 1}/{args.repeat}: feed-forward {off['sps']:8.0f}  "
            f"{args.core} {on['sps']:8.0f} env steps/s  ratio {pairs[-1]['ratio']:.3f}"
        )
    result = {
        "what": "env steps/s of configs/quickstart.yaml, feed-forward vs a recurrent core",
        "config": str(QUICKSTART.relative_to(QUICKSTART.parent.parent)),
        "actors_mode": args.mode,
        "core": {"kind": args.core, "hidden": 128, "shared": True},
        "seconds_per_run": args.seconds,
        "warmup_s": args.warmup,
        "pairs": pairs,
        "feed_forward_sps_median": statistics.median(p["feed_forward"]["sps"] for p in pairs),
        "recurrent_sps_median": statistics.median(p["recurrent"]["sps"] for p in pairs),
        "ratio_median": round(statistics.median(p["ratio"] for p in pairs), 3),
        "machine": machine(),
    }
    path = write_result("recurrent", result, args.out)
    print(
        f"median: feed-forward {result['feed_forward_sps_median']:.0f}, {args.core} "
        f"{result['recurrent_sps_median']:.0f} env steps/s; ratio {result['ratio_median']:.3f}"
    )
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
