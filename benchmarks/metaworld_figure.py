"""Meta-World MT10 and MT50: success rate against env steps for each learning rule, over
seeds, with the published figures as reference lines (docs/BENCHMARKS.md, "Meta-World MT10",
"Meta-World MT50").

    .venv-metaworld/bin/python benchmarks/metaworld_figure.py \\
        --arm sac=docs/results/learning_mt10_sac_s0.json,docs/results/learning_mt10_sac_s1.json \\
        --arm impala=docs/results/learning_mt10_impala_s0.json [--name mt10] [--suite mt50]
    # prints success at each budget per arm, the final agents' IQM and per-task table,
    # writes docs/results/<name>.json and <name>.png

Each ``--arm NAME=FILES`` lists ``benchmarks/learning.py`` results (one or more seeds each) of
one rule on one suite's tasks (``--suite``: ``mt10``, the default, or ``mt50``; it picks the
reference lines). A run's success at a record is the mean over the tasks of
``task/<env>/success`` (the share of each task's last 20 training episodes that succeeded,
with the exploring policy) against the run's env steps in all; the greedy figure is
the final agent's, evaluated by ``learning.py --eval-episodes 50`` (Meta-World's protocol: 50
episodes per task, an episode succeeds if it succeeds at any step). Over an arm's final agents,
the greedy success's IQM and mean come with 95% stratified-bootstrap intervals over the (seeds ×
tasks) matrix (rliable, as Agarwal et al. 2021 recommend for few seeds), and each task's greedy
success over the seeds makes the per-task table. The figure has two panels: training success
against env steps and against the run's wall time. The curves are kept in the JSON, and a later
call with the same ``--name`` takes them from there for any seed whose run directory is gone.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result
from learning_stats import aggregate

ROOT = Path(__file__).resolve().parent.parent
BUDGETS = (250_000, 500_000, 1_000_000, 1_500_000, 2_000_000)

_MWPLUS_MT50 = (
    "Meta-World+ (McLean et al. 2025), v2 reward, as a published summary of its table gives it "
    "(not read in the paper itself here); budget 2M env steps per task (100M) by the authors' "
    "MT50 config"
)
REFERENCES: dict[str, tuple[tuple[str, float, str], ...]] = {  # (label, success, what it is)
    "mt10": (
        ("MT-PPO, Yu et al. 2019", 0.305, "Meta-World paper Table 1, v1 reward, its full budget"),
        ("MT-SAC, Yu et al. 2019", 0.683, "Meta-World paper Table 1, v1 reward, its full budget"),
        ("MT-SAC, McLean et al. 2025", 0.75, "Meta-World+, v2 reward, 2M env steps per task (20M)"),
    ),
    "mt50": (
        ("MT-MH-SAC, Meta-World+", 0.60, _MWPLUS_MT50 + " (read off a figure: ~60 %)"),
        ("Soft modularization, Meta-World+", 0.658, _MWPLUS_MT50),
        ("MOORE, Meta-World+", 0.720, _MWPLUS_MT50),
    ),
}
"""Each suite's reference lines."""

Record = Mapping[str, Any]


def success_curve(records: Sequence[Record]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Env steps, mean training success over the tasks and the run's wall seconds
    (``charts/elapsed_s``; NaN where a record has none) at each record that has every task's
    success (pure)."""
    steps, values, wall = [], [], []
    for rec in records:
        rates = [v for k, v in rec.items() if k.startswith("task/") and k.endswith("/success")]
        if rates and "charts/env_steps" in rec and all(isinstance(v, float | int) for v in rates):
            steps.append(float(rec["charts/env_steps"]))
            values.append(float(np.mean(rates)))
            wall.append(float(rec.get("charts/elapsed_s", np.nan)))
    return np.asarray(steps), np.asarray(values), np.asarray(wall)


def at_budget(steps: np.ndarray, values: np.ndarray, budget: float) -> float | None:
    """The curve's value at ``budget`` env steps (interpolated), None past its end."""
    if not len(steps) or budget > steps[-1] or budget < steps[0]:
        return None
    return float(np.interp(budget, steps, values))


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """Median, min and max of the values present, and how many there are."""
    kept = [v for v in values if v is not None]
    if not kept:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": float(np.median(kept)), "min": min(kept), "max": max(kept), "n": len(kept)}


def greedy_success(run: Mapping[str, Any]) -> float | None:
    """Mean over tasks of the final agent's greedy success rate (learning.py's eval)."""
    rates = [t.get("greedy_success") for t in run.get("tasks", {}).values()]
    rates = [r for r in rates if r is not None]
    return float(np.mean(rates)) if rates else None


def stored_curves(figure_json: Path) -> dict[tuple[str, int], dict[str, list[float]]]:
    """The curves an earlier call wrote to its JSON, by (learning result, seed)."""
    if not figure_json.is_file():
        return {}
    doc = json.loads(figure_json.read_text())
    return {
        (run["source"], run["seed"]): run["success_curve"]
        for runs in doc.get("runs", {}).values()
        for run in runs
    }


def load_runs(
    files: Sequence[Path], stored: Mapping[tuple[str, int], Mapping[str, list[float]]]
) -> list[dict[str, Any]]:
    """Each seed of the learning results: its curve (from its run's metrics) and final
    figures; a seed whose run directory is gone takes the curve an earlier call stored
    (``stored``, :func:`stored_curves`)."""
    runs = []
    for path in files:
        doc = json.loads(path.read_text())
        source = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        for run in doc["runs"]:
            metrics = Path(run["run_dir"]) / "metrics.jsonl"
            if metrics.exists():
                records = [json.loads(line) for line in metrics.read_text().splitlines() if line]
                steps, values, wall = success_curve(records)
            elif (source, run["seed"]) in stored:
                curve = stored[(source, run["seed"])]
                steps, values = np.asarray(curve["steps"]), np.asarray(curve["success"])
                wall = np.asarray(curve.get("wall_s") or [np.nan] * len(steps), np.float64)
            else:
                raise SystemExit(
                    f"{path}: seed {run['seed']}'s run directory {run['run_dir']} is gone and "
                    "no earlier figure JSON (--name) holds its curve"
                )
            runs.append(
                {
                    "source": source,
                    "seed": run["seed"],
                    "env_steps": run.get("env_steps"),
                    "train_wall_s": run.get("train_wall_s"),
                    "greedy_success": greedy_success(run),
                    "per_task_greedy": {
                        name: t.get("greedy_success") for name, t in run.get("tasks", {}).items()
                    },
                    "git_commit": doc.get("git_commit"),
                    "success_curve": {
                        "steps": steps.tolist(),
                        "success": values.tolist(),
                        "wall_s": [None if np.isnan(w) else w for w in wall.tolist()],
                    },
                }
            )
    return runs


def greedy_matrix(runs: Sequence[Mapping[str, Any]]) -> tuple[list[str], np.ndarray]:
    """The tasks (sorted) and the (seeds × tasks) matrix of the final agents' greedy success,
    NaN where a seed has no figure for a task (pure)."""
    tasks = sorted({t for r in runs for t in r.get("per_task_greedy", {})})
    matrix = np.full((len(runs), len(tasks)), np.nan)
    for i, r in enumerate(runs):
        for j, t in enumerate(tasks):
            value = r.get("per_task_greedy", {}).get(t)
            if value is not None:
                matrix[i, j] = float(value)
    return tasks, matrix


def arm_figures(runs: Sequence[Mapping[str, Any]], reps: int = 10_000) -> dict[str, Any]:
    """Training success at each budget, the final greedy success (its spread over seeds, its
    IQM and mean with stratified-bootstrap intervals over seeds × tasks, per task) and the
    runs' wall time, over the arm's seeds."""
    curves = [
        (np.asarray(r["success_curve"]["steps"]), np.asarray(r["success_curve"]["success"]))
        for r in runs
    ]
    tasks, matrix = greedy_matrix(runs)
    return {
        "seeds": [r["seed"] for r in runs],
        "train_success_at": {
            str(b): spread([at_budget(s, v, b) for s, v in curves]) for b in BUDGETS
        },
        "greedy_success_final": spread([r["greedy_success"] for r in runs]),
        "greedy_aggregate": aggregate(matrix, reps=reps) if tasks else None,
        "per_task_greedy": {
            t: spread([None if np.isnan(v) else float(v) for v in matrix[:, j]])
            for j, t in enumerate(tasks)
        },
        "final_env_steps": [r["env_steps"] for r in runs],
        "train_wall_s": spread([r.get("train_wall_s") for r in runs]),
    }


def plot(
    arms: Mapping[str, Sequence[Mapping[str, Any]]],
    path: Path,
    title: str,
    suite: str = "mt10",
) -> Path:
    """Every seed's training success against env steps (left, with each final agent's greedy
    success as a star) and against the run's wall time (right), one colour per arm, the
    ``suite``'s :data:`REFERENCES` dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    refs = REFERENCES[suite]
    entries = 2 * len(arms) + len(refs)  # a curve and a star per arm, a line per reference
    rows = math.ceil(entries / 3)
    panels_h, legend_h = 4.8, 0.2 * rows  # inches: the panels, the legend under them
    fig, (ax, wall_ax) = plt.subplots(1, 2, figsize=(13, panels_h + legend_h), sharey=True)
    for i, (name, runs) in enumerate(arms.items()):
        for j, run in enumerate(runs):
            c = run["success_curve"]
            seeds = f"{len(runs)} seed{'s' if len(runs) != 1 else ''}"
            label = f"{name} ({seeds})" if j == 0 else None
            style = {"color": f"C{i}", "lw": 1.2, "alpha": 0.8}
            ax.plot(np.asarray(c["steps"]) / 1e6, c["success"], label=label, **style)
            wall = np.asarray([np.nan if w is None else w for w in c.get("wall_s") or []])
            if len(wall) == len(c["success"]) and np.isfinite(wall).any():
                wall_ax.plot(wall / 3600, c["success"], label=label, **style)
            if run["greedy_success"] is not None:
                ax.plot(
                    run["env_steps"] / 1e6,
                    run["greedy_success"],
                    marker="*",
                    ms=11,
                    color=f"C{i}",
                    ls="none",
                    label=f"{name}: final agent, greedy" if j == 0 else None,
                )
    # The references in grey, told apart by their dashes: the arms keep every colour.
    for k, (label, value, _) in enumerate(refs):
        style = {"color": "0.35", "ls": ("--", ":", "-.")[k % 3], "lw": 1}
        ax.axhline(value, label=f"{label}: {value:.1%}", **style)
        wall_ax.axhline(value, **style)
    ax.set_xlabel("env steps in all (millions)")
    wall_ax.set_xlabel("wall time of the run (hours, one CPU core)")
    tasks = len({t for runs in arms.values() for r in runs for t in r.get("per_task_greedy", {})})
    ax.set_ylabel(f"{suite.upper()} success (mean over {tasks} tasks)")
    ax.set_ylim(0, 1)
    for a in (ax, wall_ax):
        a.grid(alpha=0.3)
    # One legend under both panels, so that it hides no curve however many arms there are.
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, legend_h / (panels_h + legend_h), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def print_figures(name: str, fig: Mapping[str, Any]) -> None:
    """One arm's figures on the console: success at each budget, the final agents' greedy
    success (spread, IQM and mean with intervals) and the per-task table."""
    print(f"{name}: seeds {fig['seeds']}")
    for budget, s in fig["train_success_at"].items():
        if s["n"]:
            print(
                f"  train success at {int(budget):>9,}: {s['median']:.3f} "
                f"[{s['min']:.3f}, {s['max']:.3f}] over {s['n']}"
            )
    g = fig["greedy_success_final"]
    if g["n"]:
        print(
            f"  final agent, greedy, 50 episodes per task: {g['median']:.3f} "
            f"[{g['min']:.3f}, {g['max']:.3f}] over {g['n']}"
        )
    agg = fig.get("greedy_aggregate")
    if agg and agg["iqm"] is not None:
        iqm, mean = agg["iqm"], agg["mean"]
        print(
            f"  over seeds x tasks ({agg['runs']} x {agg['tasks']}): IQM {iqm['point']:.3f} "
            f"[{iqm['ci_low']:.3f}, {iqm['ci_high']:.3f}], mean {mean['point']:.3f} "
            f"[{mean['ci_low']:.3f}, {mean['ci_high']:.3f}] (95% stratified bootstrap)"
        )
    for task, s in fig.get("per_task_greedy", {}).items():
        if s["n"]:
            print(f"    {task:<36} {s['median']:.2f} [{s['min']:.2f}, {s['max']:.2f}]")
    w = fig.get("train_wall_s", {})
    if w.get("n"):
        print(f"  training wall time per seed: {w['median'] / 3600:.2f} h (median)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", action="append", required=True, help="NAME=file.json[,file.json]")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "results")
    ap.add_argument("--name", default="mt10", help="the result's name: <out-dir>/<name>.json, .png")
    ap.add_argument("--suite", choices=sorted(REFERENCES), default="mt10", help="reference lines")
    ap.add_argument("--title", default=None, help="default: Meta-World <SUITE>, one agent: ...")
    ap.add_argument("--reps", type=int, default=10_000, help="bootstrap replications")
    args = ap.parse_args(argv)
    stored = stored_curves(args.out_dir / f"{args.name}.json")
    arms: dict[str, list[dict[str, Any]]] = {}
    for spec in args.arm:
        name, _, files = spec.partition("=")
        arms[name] = load_runs([Path(f).resolve() for f in files.split(",") if f], stored)
    figures = {name: arm_figures(runs, args.reps) for name, runs in arms.items()}
    for name, fig in figures.items():
        print_figures(name, fig)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    title = args.title or f"Meta-World {args.suite.upper()}, one agent: training success"
    png = plot(arms, args.out_dir / f"{args.name}.png", title, args.suite)
    result = {
        "benchmark": args.name,
        "machine": machine(),
        "suite": args.suite,
        "references": [
            {"label": a, "success": b, "measured": c} for a, b, c in REFERENCES[args.suite]
        ],
        "figures": figures,
        "runs": arms,
        "plot": str(png.relative_to(ROOT) if png.is_relative_to(ROOT) else png),
    }
    print(f"wrote {write_result(args.name, result, args.out_dir)} and {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
