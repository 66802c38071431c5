"""PopArt across reward scales: does one agent learn tasks whose rewards differ 100,000x?

    .venv/bin/python benchmarks/popart_scales.py     # writes docs/results/popart_scales.json

A small suite of fast-learning tasks is trained under three conditions, each with the same
settings and budget and once per seed (``--seeds``, default 0 1; returns are averaged over them):

* ``reference``: every task at its original reward scale (1.0), PopArt on;
* ``popart``: per-task ``reward_scale`` spread over 1e-2 … 1e3 (see ``SCALES``), PopArt on;
* ``no_popart``: the same scales, PopArt off (raw, reward-scaled value targets).

Each task's final mean return (unscaled: the env's own rewards; mean over the episodes that ended
in the last 20% of the task's env steps, ``FINAL_FRACTION``) is reported as a % of the
reference run's, with the median over tasks (the mean of the last 20 episodes is kept too).
Target: with PopArt every task ≥ 90% of its original-scale result. ``--beta`` sets PopArt's
step size for both PopArt runs; ``--extra-beta`` adds scaled runs with other step sizes.

PopArt's statistics are set from each task's first batch of targets (mtrl's default,
``popart.init_from_first_batch``). ``--stock-init`` (about 4 more minutes) adds a reference and
a scaled run with the paper's start instead (μ = 0, ν = 1, moved by β from the first update);
their % are against that reference.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

from mtrl.actors.protocol import UnrollInfo
from mtrl.config import ExperimentConfig, parse_config
from mtrl.plugins import get_plugins
from mtrl.train.trainer import Trainer

#: (env id, reward_scale in the scaled runs).
SCALES: list[tuple[str, float]] = [
    ("gymnasium/CartPole-v1", 0.01),
    ("minatar/breakout", 1.0),
    ("gymnasium/InvertedPendulum-v5", 100.0),
    ("minatar/space_invaders", 1000.0),
]

#: "Final" return: mean over the episodes that ended in this last fraction of a task's steps
#: (hundreds of episodes; the last 20 alone swing by tens of percent between neighbours).
FINAL_FRACTION = 0.2

SETTINGS: dict[str, Any] = {
    "env_steps_per_task": 300_000,
    "num_envs": 16,
    "unroll_length": 20,
    "learning_rate": 6e-4,
    "encoder_dim": 64,
    "torso": [64],
    "actors": "serial",
    "seeds": [0, 1],
}


def make_config(
    scaled: bool, popart: bool, beta: float, run_dir: str, seed: int, stock: bool = False
) -> ExperimentConfig:
    """One run's config: ``scaled`` applies ``SCALES``; ``popart`` toggles PopArt; ``stock``
    starts PopArt's statistics at μ = 0, ν = 1 instead of the first batch's."""
    s = SETTINGS
    lines = [
        f"name: popart_scales\nseed: {seed}",
        f"total_env_steps: {s['env_steps_per_task'] * len(SCALES)}",
        "tasks:",
    ]
    for env, scale in SCALES:
        scale = scale if scaled else 1.0
        lines.append(f"  - {{env: {env}, num_envs: {s['num_envs']}, reward_scale: {scale}}}")
    lines += [
        f"actors: {{mode: {s['actors']}}}",
        "learner:",
        f"  unroll_length: {s['unroll_length']}",
        f"  batch_size: {s['num_envs'] * len(SCALES)}",
        f"  learning_rate: {s['learning_rate']}",
        f"  popart: {{enabled: {str(popart).lower()}, beta: {beta},"
        f" init_from_first_batch: {str(not stock).lower()}}}",
        f"  model: {{encoder_dim: {s['encoder_dim']}, torso: {s['torso']}}}",
        f"tracking: {{run_dir: {run_dir}, console: quiet, csv: false, log_every_s: 30,"
        " wandb: {mode: disabled}}",
        "checkpoint: {enabled: false}",
    ]
    return parse_config("\n".join(lines) + "\n", env_ids=get_plugins().envs.ids())


class EpisodeLog(Trainer):
    """A trainer that keeps every finished episode's return with its task's env-step count."""

    def __init__(self, cfg: ExperimentConfig, **kw: Any) -> None:
        super().__init__(cfg, **kw)
        self.episodes: list[list[tuple[int, float]]] = [[] for _ in cfg.tasks]

    def on_unroll(self, task: int, info: UnrollInfo) -> None:
        steps = self.progress[task].env_steps
        self.episodes[task].extend((steps, float(r)) for r in info.episode_returns)

    def window_mean(self, task: int, fraction: float) -> float | None:
        """Mean return of the episodes that ended in the last ``fraction`` of the task's steps."""
        eps = self.episodes[task]
        if not eps:
            return None
        start = (1.0 - fraction) * self.progress[task].env_steps
        tail = [r for s, r in eps if s > start] or [eps[-1][1]]
        return statistics.fmean(tail)


def train(
    scaled: bool, popart: bool, beta: float, seed: int, label: str, stock: bool = False
) -> dict[str, Any]:
    """Train one run; final unscaled mean returns per task, wall time and PopArt's σ."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = make_config(scaled, popart, beta, tmp, seed, stock)
        load0 = os.getloadavg()[0]
        trainer = EpisodeLog(cfg, console=False, write_run_dir=False)
        try:
            res = trainer.run()
            sigma = trainer.learner.sigma.tolist() if popart else None
            window = {
                t.key: trainer.window_mean(i, FINAL_FRACTION) for i, t in enumerate(cfg.tasks)
            }
        finally:
            trainer.close()
    last20 = {r.name: r.mean_return for r in res.tasks}
    returns = window
    shown = " ".join(f"{k.split('/')[-1]}={v:.4g}" for k, v in returns.items() if v is not None)
    print(f"[{label}] {res.seconds:.0f}s {res.env_steps:,} steps: {shown}", flush=True)
    return {
        "scaled": scaled,
        "popart": popart,
        "beta": beta if popart else None,
        "stock_init": stock,
        "wall_s": res.seconds,
        "env_steps": res.env_steps,
        "load_avg_1min": [load0, os.getloadavg()[0]],
        "final_mean_return": returns,
        "last_20_episodes_mean_return": last20,
        "popart_sigma": dict(zip(returns, sigma, strict=True)) if sigma else None,
    }


def relative(run: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """Each task's final return as % of the reference run's, and the median over tasks."""
    pct: dict[str, float | None] = {}
    for env, _ in SCALES:
        r, base = run["final_mean_return"][env], ref["final_mean_return"][env]
        pct[env] = None if r is None or not base else 100.0 * r / base
    vals = [v for v in pct.values() if v is not None]
    return {
        "percent_of_reference": pct,
        "median_percent": statistics.median(vals) if vals else None,
        "min_percent": min(vals) if vals else None,
        "all_ge_90": bool(vals) and len(vals) == len(pct) and min(vals) >= 90.0,
    }


def table(runs: dict[str, dict[str, Any]], rel: dict[str, dict[str, Any]]) -> str:
    """The docs table (markdown): one row per task, a column per run."""
    names = list(runs)
    head = "| task | scale | " + " | ".join(names) + " |"
    rows = [head, "|---" * (len(names) + 2) + "|"]
    for env, scale in SCALES:
        cells = []
        for n in names:
            r = runs[n]["final_mean_return"][env]
            p = rel.get(n, {}).get("percent_of_reference", {}).get(env)
            cell = "—" if r is None else f"{r:.4g}"
            cells.append(cell + (f" ({p:.0f}%)" if p is not None and n != "reference" else ""))
        rows.append(f"| {env} | {scale:g} | " + " | ".join(cells) + " |")
    med = ["" if n == "reference" else f"**{rel[n]['median_percent']:.0f}%**" for n in names]
    rows.append("| median % of reference | | " + " | ".join(med) + " |")
    return "\n".join(rows)


def over_seeds(
    scaled: bool, popart: bool, beta: float, seeds: list[int], label: str, stock: bool = False
) -> dict[str, Any]:
    """One condition trained once per seed; final returns averaged over the seeds."""
    per_seed = [train(scaled, popart, beta, s, f"{label} seed {s}", stock) for s in seeds]
    mean = {}
    for env, _ in SCALES:
        vals = [r["final_mean_return"][env] for r in per_seed]
        mean[env] = None if None in vals else statistics.fmean(vals)
    return {
        "scaled": scaled,
        "popart": popart,
        "beta": beta if popart else None,
        "seeds": seeds,
        "final_mean_return": mean,
        "wall_s": sum(r["wall_s"] for r in per_seed),
        "per_seed": per_seed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps-per-task", type=int, default=SETTINGS["env_steps_per_task"])
    ap.add_argument("--beta", type=float, default=0.01, help="PopArt β of the PopArt runs")
    ap.add_argument("--extra-beta", type=float, nargs="*", default=[], help="more scaled runs")
    ap.add_argument("--seeds", type=int, nargs="+", default=SETTINGS["seeds"])
    ap.add_argument(
        "--stock-init",
        action="store_true",
        help="also run reference and scaled with the paper's start (mu=0, nu=1)",
    )
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    SETTINGS["env_steps_per_task"] = args.steps_per_task
    SETTINGS["seeds"] = args.seeds
    info = machine()
    seeds, beta = args.seeds, args.beta
    runs = {
        "reference": over_seeds(False, True, beta, seeds, "reference"),
        "popart": over_seeds(True, True, beta, seeds, "popart"),
        "no_popart": over_seeds(True, False, beta, seeds, "no_popart"),
    }
    for b in args.extra_beta:
        runs[f"popart_beta_{b:g}"] = over_seeds(True, True, b, seeds, f"popart beta={b:g}")
    rel = {n: relative(r, runs["reference"]) for n, r in runs.items() if n != "reference"}
    if args.stock_init:
        ref = over_seeds(False, True, beta, seeds, "reference (stock init)", stock=True)
        runs["reference_stock_init"] = ref
        runs["popart_stock_init"] = over_seeds(
            True, True, beta, seeds, "popart (stock init)", stock=True
        )
        rel["reference_stock_init"] = relative(ref, runs["reference"])
        rel["popart_stock_init"] = relative(runs["popart_stock_init"], ref)
    payload = {
        "machine": info,
        "settings": {**SETTINGS, "scales": [list(s) for s in SCALES], "beta": beta},
        "runs": runs,
        "relative": rel,
        "target_met": rel["popart"]["all_ge_90"],
        "target_met_with_stock_init": (
            rel["popart_stock_init"]["all_ge_90"] if args.stock_init else None
        ),
        "load_avg_1min_at_end": os.getloadavg()[0],
    }
    print(table(runs, rel))
    print(f"target (every task >= 90% with PopArt) met: {payload['target_met']}")
    if not args.no_write:
        print(f"wrote {write_result('popart_scales', payload)}")


if __name__ == "__main__":
    main()
