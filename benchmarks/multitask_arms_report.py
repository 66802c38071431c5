"""The arms of ``multitask_vs_single.py --arms`` over seeds: one table from its result files.

    .venv/bin/python benchmarks/multitask_arms_report.py \
        docs/results/multitask_vs_single_arms_s*.json docs/results/multitask_vs_single_turns_s*.json
    # prints the markdown table; writes docs/results/multitask_arms_report.json

Each file holds one or more seeds, each with every arm's joint run and the four tasks alone
(measured side by side in that call). Per arm, over the seeds found:

- ``reached``: seeds on which the joint run got every task to its target, and its wall seconds
  to the last of them per seed; ``faster``: seeds on which that was sooner than the tasks alone
  back to back (the sum of their times to target; only where all four alone reached theirs);
- the final score of each task at the run's end (the mean of its last 20 training episodes),
  normalised to 0 at the env's random score and 1 at the target, and its IQM over seeds × tasks
  with a 95% stratified-bootstrap interval (rliable); ``worst``: the lowest normalised final
  score of any task on any seed (below 1: some task ended under its target).

A seed an arm was not run on is left out of that arm's figures, and the count says so.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import learning_stats as ls
from _common import write_result

Run = Mapping[str, Any]


def every_target_s(run: Run) -> float | None:
    """Wall seconds of ``run`` (joint or alone) to its last task's target; None if one missed."""
    tasks = run["tasks"].values()
    return max(t["wall_s"] for t in tasks) if all(t["reached"] for t in tasks) else None


def alone_sum_s(solo: Mapping[str, Run]) -> float | None:
    """The tasks alone back to back: the sum of their times to target; None if one missed."""
    times = [every_target_s(r) for r in solo.values()]
    return None if any(t is None for t in times) else float(sum(times))  # type: ignore[arg-type]


def normalised_finals(run: Run, randoms: Mapping[str, float]) -> list[float]:
    """Each task's final training mean, 0 at its random score and 1 at its target."""
    return [
        ls.normalise(t["final_mean_return"], randoms[env], t["target"])
        for env, t in run["tasks"].items()
    ]


def merge_seeds(docs: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Seed → {"joint": {arm: run}, "solo": {env: run}} over every file; where two files ran
    the same seed, the arms are pooled and each keeps its own file's solo runs beside it."""
    seeds: dict[int, dict[str, Any]] = {}
    for doc in docs:
        for entry in doc["per_seed"]:
            s = seeds.setdefault(entry["seed"], {"joint": {}, "solo_of": {}})
            for arm, run in entry["joint"].items():
                s["joint"][arm] = run
                s["solo_of"][arm] = entry["solo"]
    return seeds


def arm_figures(
    seeds: Mapping[int, Mapping[str, Any]], arm: str, randoms: Mapping[str, float]
) -> dict[str, Any]:
    """One arm's figures over the seeds it ran on (see the module's docstring)."""
    times: dict[int, float | None] = {}
    alone: dict[int, float | None] = {}
    finals = []
    for seed, s in sorted(seeds.items()):
        if arm not in s["joint"]:
            continue
        run = s["joint"][arm]
        times[seed] = every_target_s(run)
        alone[seed] = alone_sum_s(s["solo_of"][arm])
        finals.append(normalised_finals(run, randoms))
    reached = [t for t in times.values() if t is not None]
    faster = [
        seed
        for seed, t in times.items()
        if t is not None and alone[seed] is not None and t < alone[seed]  # type: ignore[operator]
    ]
    agg = ls.aggregate(np.array(finals)) if finals else {"iqm": None}
    return {
        "seeds": list(times),
        "time_to_every_target_s": times,
        "alone_sum_s": alone,
        "reached": len(reached),
        "median_time_reached_s": float(np.median(reached)) if reached else None,
        "faster_than_alone": faster,
        "final_normalised": finals,
        "final_iqm": agg["iqm"],
        "worst_final": float(np.min(finals)) if finals else None,
    }


def table(figures: Mapping[str, Mapping[str, Any]]) -> str:
    """The markdown table of :func:`arm_figures` per arm."""
    rows = [
        "| arm | seeds | every target | s to every target, per seed | sooner than alone "
        "| final IQM [95% CI] | worst task at the end |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, f in figures.items():
        times = f["time_to_every_target_s"].values()
        per = ", ".join("✗" if t is None else f"{t:.0f}" for t in times)
        q = f["final_iqm"]
        ci = "—" if q is None else f"{q['point']:.2f} [{q['ci_low']:.2f}, {q['ci_high']:.2f}]"
        rows.append(
            f"| `{arm}` | {len(f['seeds'])} | {f['reached']}/{len(f['seeds'])} | {per} | "
            f"{len(f['faster_than_alone'])}/{len(f['seeds'])} | {ci} | {f['worst_final']:.2f} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path, help="multitask_vs_single --arms results")
    ap.add_argument("--name", default="multitask_arms_report", help="result name to write")
    args = ap.parse_args(argv)
    from mtrl.plugins import get_plugins

    docs = [json.loads(p.read_text()) for p in args.files]
    seeds = merge_seeds(docs)
    arms = list(dict.fromkeys(a for s in seeds.values() for a in s["joint"]))
    envs = {e for s in seeds.values() for r in s["joint"].values() for e in r["tasks"]}
    plugins = get_plugins()
    randoms = {e: plugins.envs.get(e).random_score or 0.0 for e in envs}
    figures = {arm: arm_figures(seeds, arm, randoms) for arm in arms}
    alone = {
        seed: alone_sum_s(next(iter(s["solo_of"].values()))) for seed, s in sorted(seeds.items())
    }
    print(table(figures))
    print("tasks alone, summed s per seed: " + ", ".join(
        f"{seed}: {'✗' if t is None else f'{t:.0f}'}" for seed, t in alone.items()))  # fmt: skip
    payload = {"files": [str(p) for p in args.files], "arms": figures, "randoms": randoms}
    print(f"wrote {write_result(args.name, payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
