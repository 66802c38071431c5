"""Learning benchmark: how well, how reliably and how fast a suite is learned, over N seeds.

    .venv/bin/python benchmarks/learning.py configs/quickstart.yaml --seeds 10 [--jobs 1] \\
        [--eval-episodes 20] [--set learner.learning_rate=0.0003 --set actors.mode=serial] \\
        [--total-env-steps N] [--name NAME] [--out-dir docs/results] [--reuse] \\
        [--nproc N] [--extend WORK_DIR] [--progress]
    # writes docs/results/learning_<name>.json and learning_<name>.png

Each seed is one ``mtrl train`` of the config (with the ``--set`` overrides; a path the config
schema does not know fails before anything runs) in a subprocess, ``--jobs`` at a time, then an
evaluation of its final checkpoint as ``mtrl eval`` does (greedy and stochastic actions, eval
env seeds). Runs, their configs and logs go under the work dir (default
``runs/bench/<name>/``); wandb is off and checkpoints on (the eval needs the final one).
``--reuse`` keeps the finished runs of an earlier call whose seed config is the same (to
re-analyse without retraining) and continues its interrupted ones from their newest checkpoint
(``mtrl train --resume``; the wall time is summed over the attempts). An off-policy run resumes
with its replay only when its checkpoints hold it: add ``--set checkpoint.replay=true``.
``--extend WORK_DIR`` starts each seed from its finished training in an earlier call's work
dir at a smaller budget with otherwise the same settings (a copy of its run, continued from its
final checkpoint to this budget; its wall time carried over), so a 2M-step benchmark need not
train its first 500k steps again. ``--progress`` trains nothing: it writes
``learning_<name>_progress.json`` (and its PNG) with the curves of the seeds started so far,
for a long benchmark while it runs or between the sittings it is resumed in.

Per task and seed, from the run's ``metrics.jsonl``: the final return (mean of the last 20
episodes at the last record), the best, final/best (from the random score where returns are
negative), the same final/best over 100-episode windows from its ``episodes.csv``
(``final_over_best_100``: the logged best is the top of a few noisy 20-episode windows), the
task's env steps and the run's wall seconds when the return first reached
``target_score``, the greedy and stochastic eval returns, and "solved at end" (final and
greedy both at target). Per task the table shows the median and min/max over seeds.
Aggregates over tasks x seeds (tasks with a target only): IQM and mean of the normalised score
``(R - random) / (target - random)`` (random: the env's declared ``random_score``, else 0) of
the final and of the greedy returns, with 95% stratified-bootstrap CIs from ``rliable``. The
PNG has one panel per task: return against the task's env steps, the mean over seeds with a
95% bootstrap band, the target dashed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import learning_plot as lp
import learning_runs as lr
import learning_stats as ls
from _common import machine, write_result

from mtrl.errors import UserError
from mtrl.plugins import get_plugins
from mtrl.tracking.episodes import FILENAME as EPISODES_FILE
from mtrl.tracking.episodes import read_episodes

ROOT = Path(__file__).resolve().parent.parent
NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


# ---------------------------------------------------------------------------------------------
# planning


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", type=Path, help="an mtrl experiment config (YAML)")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (10)")
    ap.add_argument("--seed-list", help="comma-separated seeds instead, e.g. 0,3,5")
    ap.add_argument("--jobs", type=int, default=1, help="trainings at a time (1)")
    ap.add_argument("--eval-episodes", type=int, default=20, help="per task and mode (20)")
    ap.add_argument(
        "--eval-workers",
        type=int,
        default=1,
        help="processes each seed's evaluation plays its tasks in (1; mtrl eval --workers)",
    )
    ap.add_argument(
        "--nproc", type=int, default=1, help="learner replicas per training (mtrl train --nproc)"
    )
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="config override, e.g. learner.learning_rate=3e-4 (YAML value; repeatable)",
    )
    ap.add_argument("--total-env-steps", type=int, help="override total_env_steps")
    ap.add_argument("--name", help="benchmark name (default: the config file's stem)")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "results")
    ap.add_argument("--work-dir", type=Path, help="runs and logs (default runs/bench/<name>)")
    ap.add_argument(
        "--reps", type=int, default=10_000, help="bootstrap replications (10000; curves: 2000)"
    )
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="keep the finished runs of an earlier call with the same seed config and "
        "continue its interrupted ones from their newest checkpoint",
    )
    ap.add_argument(
        "--extend",
        type=Path,
        metavar="WORK_DIR",
        help="continue each seed's finished training in WORK_DIR (an earlier call with the "
        "same settings at a smaller budget) to this budget, from its final checkpoint, "
        "instead of training it again from the start",
    )
    ap.add_argument(
        "--progress",
        action="store_true",
        help="train and evaluate nothing: report the curves of the runs started so far "
        "(learning_<name>_progress.json; no final agent, so no greedy figures)",
    )
    return ap.parse_args(argv)


def seed_list(args: argparse.Namespace) -> list[int]:
    """The seeds to run, from ``--seed-list`` or ``--seeds``."""
    if args.seed_list:
        try:
            seeds = [int(s) for s in args.seed_list.split(",") if s.strip()]
        except ValueError:
            raise UserError(f"--seed-list {args.seed_list!r}: give integers, e.g. 0,3,5") from None
    else:
        seeds = list(range(args.seeds))
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise UserError(f"seeds {seeds}: need at least one, all distinct and >= 0")
    return seeds


def make_plan(args: argparse.Namespace) -> lr.Plan:
    """Read the config, apply the overrides and validate the result as ``mtrl train`` would."""
    name = args.name or args.config.stem
    if not NAME_RE.match(name):
        raise UserError(f"--name {name!r}: use letters, digits and _.- only")
    if min(args.jobs, args.eval_episodes, args.eval_workers, args.nproc) < 1:
        raise UserError("--jobs, --eval-episodes, --eval-workers and --nproc must be at least 1")
    try:
        data = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"{args.config}: cannot read config: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise UserError(f"{args.config}: invalid YAML: {e}") from None
    if not isinstance(data, dict):
        raise UserError(f"{args.config}: the config must be a mapping with a `tasks:` list")
    overrides = list(args.overrides)
    if args.total_env_steps is not None:
        overrides.append(f"total_env_steps={args.total_env_steps}")
    try:
        data = ls.apply_overrides(data, overrides)
    except ValueError as e:
        raise UserError(str(e)) from None
    plugins = get_plugins()
    cfg = ls.validate(
        data,
        f"{args.config} with --set overrides" if overrides else str(args.config),
        **plugins.config_context(),
    )
    tasks = [
        ls.Task(t.key, t.env, t.target_score, plugins.envs.get(t.env).random_score)
        for t in cfg.tasks
    ]
    work_dir = (args.work_dir or Path("runs") / "bench" / name).resolve()
    return lr.Plan(
        name,
        args.config,
        overrides,
        data,
        tasks,
        seed_list(args),
        work_dir,
        args.jobs,
        args.eval_episodes,
        args.reuse,
        args.nproc,
        args.extend.resolve() if args.extend else None,
        args.eval_workers,
    )


# ---------------------------------------------------------------------------------------------
# analysis


def read_records(run_dir: Path, nproc: int = 1) -> list[dict[str, Any]]:
    """The run's metrics records (``metrics.jsonl``); a torn last line is skipped.

    A data-parallel run's records count each task's env steps of rank 0's actors only (its
    returns are rank 0's episodes): with ``nproc`` replicas stepping alike, the job took about
    ``nproc`` times as many, and the curves and steps-to-target are put on that scale.
    """
    records = []
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return records
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if nproc > 1:
            for key, value in rec.items():
                if key.startswith("task/") and key.endswith("/env_steps"):
                    rec[key] = value * nproc
        records.append(rec)
    return records


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def run_entry(
    plan: lr.Plan, run: lr.SeedRun, records: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """One seed's JSON entry: where it ran, how long, and (finished runs) its task figures."""
    entry: dict[str, Any] = {
        "seed": run.seed,
        "run_dir": str(run.run_dir) if run.run_dir else None,
        "error": run.error,
        "reused": run.reused,
        "train_wall_s": run.train_wall_s,
        "eval_wall_s": run.eval_wall_s,
    }
    if records is not None:
        last = records[-1] if records else {}
        entry["env_steps"] = last.get("charts/env_steps")
        entry["elapsed_s"] = last.get("charts/elapsed_s")
        episodes = read_episodes(run.run_dir / EPISODES_FILE) if run.run_dir else {}
        returns = {task: ep.returns for task, ep in episodes.items()}
        entry["tasks"] = ls.seed_figures(plan.tasks, records, run.eval, returns)
    return entry


def analyse(plan: lr.Plan, seed_runs: list[lr.SeedRun], reps: int, png: Path) -> dict[str, Any]:
    """Figures per seed and task, the summary, aggregates and the curves' PNG."""
    records = {
        r.seed: read_records(r.run_dir, plan.nproc)
        for r in seed_runs
        if r.error is None and r.run_dir is not None
    }
    runs = [run_entry(plan, r, records.get(r.seed)) for r in seed_runs]
    good = [e for e in runs if "tasks" in e]
    panels = [
        lp.task_panel(
            t.name,
            [ls.extract_curve(recs, t.name) for recs in records.values()],
            t.target,
            min(reps, 2000),
            0,
        )
        for t in plan.tasks
    ]
    lp.plot_panels(panels, png, f"{plan.name}: {len(good)} seeds, mean and 95% CI")
    return {
        "runs": runs,
        "summary": ls.summarise(plan.tasks, [e["tasks"] for e in good]),
        "aggregates": ls.suite_aggregates(plan.tasks, [e["tasks"] for e in good], reps),
        "curves": {
            p.task: {"steps": p.grid.tolist(), **{k: v.tolist() for k, v in p.band.items()}}
            for p in panels
            if p.band is not None
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        plan = make_plan(args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    info, t0 = machine(), time.perf_counter()
    print(f"{plan.name}: seeds {plan.seeds}, {plan.jobs} at a time; work dir {plan.work_dir}")
    seed_runs = lr.in_progress(plan) if args.progress else lr.run_all(plan)
    stem = f"learning_{plan.name}_progress" if args.progress else f"learning_{plan.name}"
    png = args.out_dir / f"{stem}.png"
    result = analyse(plan, seed_runs, args.reps, png)
    payload = {
        "benchmark": "learning",
        "name": plan.name,
        "config": str(plan.config_path),
        "overrides": plan.overrides,
        "resolved_config": plan.data,
        "seeds": plan.seeds,
        "jobs": plan.jobs,
        "eval_episodes": plan.eval_episodes,
        "in_progress": args.progress,
        "work_dir": str(plan.work_dir),
        "tasks": [asdict(t) for t in plan.tasks],
        **result,
        "wall_s_total": time.perf_counter() - t0,
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "machine": info,
        "plot": str(png),
    }
    print()
    print(ls.format_report(plan.name, result["summary"], result["aggregates"]))
    print(f"\nwrote {write_result(stem, payload, args.out_dir)} and {png}")
    failed = [r.seed for r in seed_runs if r.error]
    if failed:
        print(f"failed seeds: {failed} (left out above)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
