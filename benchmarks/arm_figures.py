"""The figures of the PBT-vs-independent benchmark (benchmarks/pbt_vs_independent.py): one
run's and one arm's, from metrics records (pure: records in, numbers out), and the clock that
stamps records with one arm-wide time as they are written."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import learning_stats as ls
import numpy as np

Record = Mapping[str, Any]


# ---------------------------------------------------------------------------------------------
# the figures of one run and of an arm (pure: records in, numbers out)


def time_to_every_target(seconds: Sequence[float | None]) -> float | None:
    """When the last task reached its target: the latest of the tasks' times, None if a task
    never did (or there is no task with a target)."""
    if not seconds or any(s is None for s in seconds):
        return None
    return max(s for s in seconds if s is not None)


def crossing_index(records: Sequence[Record], task: ls.Task) -> int | None:
    """Index in ``records`` of the first whose return of ``task`` is at its target
    (:func:`learning_stats.first_crossing`); None if none is, or the task has no target."""
    # The records' positions (from 1: extract_curve reads a 0 second as missing) as their
    # seconds, so the crossing says which record it was.
    indexed = [{**rec, "charts/elapsed_s": i + 1} for i, rec in enumerate(records)]
    hit = ls.first_crossing(ls.extract_curve(indexed, task.name), task.target)
    return None if hit is None else int(hit[1]) - 1


def _iqm(values: Sequence[float]) -> float:
    from rliable import metrics

    return float(metrics.aggregate_iqm(np.asarray([values], np.float64)))


def run_figures(
    tasks: Sequence[ls.Task], records: Sequence[Record], stamps: Sequence[float]
) -> dict[str, Any]:
    """One run's figures from its metrics ``records`` and the arm-clock second at which each
    was first read (``stamps``, as long as ``records``).

    Per task: the final return (last record) and its normalised score, the greedy eval return
    where the last record has one, and at the first crossing of the target the task's env
    steps, the run's env steps and the arm's seconds. Over the tasks with a target: the
    seconds and run env steps at which the last of them got there (None if one never did),
    and the IQM and mean of the final normalised scores (None if a task has no final return).
    """
    if len(records) != len(stamps):
        raise ValueError(f"{len(records)} records but {len(stamps)} stamps")
    last = records[-1] if records else {}
    out: dict[str, Any] = {"tasks": {}}
    for t in tasks:
        curve = ls.extract_curve(records, t.name)
        final = float(curve.returns[-1]) if len(curve) else None
        i = crossing_index(records, t)
        out["tasks"][t.name] = {
            "target": t.target,
            "final": final,
            "final_normalised": (
                ls.normalise(final, t.floor, t.target) if final is not None and t.scored else None
            ),
            "greedy": last.get(f"eval/{t.name}/greedy_return"),
            "steps_to_target": None if i is None else records[i][f"task/{t.name}/env_steps"],
            "run_env_steps_at_target": None if i is None else records[i].get("charts/env_steps"),
            "seconds_to_target": None if i is None else float(stamps[i]),
        }
    targeted = [out["tasks"][t.name] for t in tasks if t.target is not None]
    every = time_to_every_target([f["seconds_to_target"] for f in targeted])
    out["seconds_to_every_target"] = every
    out["run_env_steps_at_every_target"] = (
        None
        if every is None
        else next(f["run_env_steps_at_target"] for f in targeted if f["seconds_to_target"] == every)
    )
    scores = [out["tasks"][t.name]["final_normalised"] for t in tasks if t.scored]
    whole = bool(scores) and all(s is not None for s in scores)
    out["final_iqm"] = _iqm(scores) if whole else None
    out["final_mean"] = float(np.mean(scores)) if whole else None
    out["env_steps"] = last.get("charts/env_steps")
    out["records"] = len(records)
    out["last_record_s"] = float(stamps[-1]) if len(stamps) else None
    return out


def best_run(runs: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the arm's best run: the one at every target soonest; among equal times, and
    after every run that got there, the higher final normalised mean. Runs with an ``error``
    are left out; None if none is left."""

    def key(i: int) -> tuple[float, float]:
        r = runs[i]
        every, mean = r.get("seconds_to_every_target"), r.get("final_mean")
        return (math.inf if every is None else every, math.inf if mean is None else -mean)

    ok = [i for i, r in enumerate(runs) if not r.get("error")]
    return min(ok, key=key) if ok else None


def arm_summary(
    tasks: Sequence[ls.Task], runs: Sequence[Mapping[str, Any]], reps: int, seed: int = 0
) -> dict[str, Any]:
    """The arm's best run (:func:`best_run`) with its time to every target and final IQM, and
    the IQM and mean of the final normalised scores over all its good runs x scored tasks
    with 95% bootstrap CIs (:func:`learning_stats.aggregate`)."""
    scored = [t for t in tasks if t.scored]
    good = [r for r in runs if not r.get("error")]
    matrix = np.full((len(good), len(scored)), np.nan)
    for i, r in enumerate(good):
        for j, t in enumerate(scored):
            value = r["tasks"][t.name]["final_normalised"]
            matrix[i, j] = np.nan if value is None else value
    b = best_run(runs)
    return {
        "best": b,
        "best_label": None if b is None else runs[b].get("label"),
        "best_seconds_to_every_target": None if b is None else runs[b]["seconds_to_every_target"],
        "best_final_iqm": None if b is None else runs[b]["final_iqm"],
        "reached_every_target": sum(r["seconds_to_every_target"] is not None for r in good),
        "runs": len(runs),
        "final": ls.aggregate(matrix, reps, seed) if len(good) and scored else None,
    }


def verdict(pbt: Mapping[str, Any], independent: Mapping[str, Any]) -> dict[str, bool | None]:
    """Whether PBT's best member met the target against the best independent run (both
    :func:`arm_summary`): every target sooner (a run that never got there is never sooner;
    False when neither got there), and a final IQM no lower (None when one is missing)."""
    p, q = pbt["best_seconds_to_every_target"], independent["best_seconds_to_every_target"]
    sooner = p is not None and (q is None or p < q)
    pi, qi = pbt["best_final_iqm"], independent["best_final_iqm"]
    no_lower = None if pi is None or qi is None else pi >= qi
    return {"sooner": sooner, "iqm_no_lower": no_lower, "met": bool(sooner and no_lower)}


# ---------------------------------------------------------------------------------------------
# one clock for both arms


class RecordClock:
    """Reads the ``metrics.jsonl`` files under ``root`` that match ``pattern`` every ``poll_s``
    seconds while an arm trains, and stamps each new record with the seconds since ``t0``
    (``time.perf_counter``) at which it was first read. A line not yet finished is read again
    at the next sweep; a finished line that is not JSON is skipped."""

    def __init__(self, root: Path, pattern: str, t0: float, poll_s: float = 1.0) -> None:
        self.root, self.pattern, self.t0, self.poll_s = root, pattern, t0, poll_s
        self.offsets: dict[Path, int] = {}
        self.records: dict[Path, list[dict[str, Any]]] = {}
        self.stamps: dict[Path, list[float]] = {}
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> RecordClock:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling, then read what is left (stamped now: the arm has ended)."""
        self._halt.set()
        self._thread.join()
        self.sweep()

    def _loop(self) -> None:
        while not self._halt.wait(self.poll_s):
            self.sweep()

    def sweep(self) -> None:
        for path in sorted(self.root.glob(self.pattern)):
            offset = self.offsets.get(path, 0)
            try:
                with path.open("rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue
            now = time.perf_counter() - self.t0
            end = data.rfind(b"\n") + 1  # up to the last whole line
            for line in data[:end].splitlines():
                try:
                    rec = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                self.records.setdefault(path, []).append(rec)
                self.stamps.setdefault(path, []).append(now)
            self.offsets[path] = offset + end

    def runs(self) -> dict[Path, tuple[list[dict[str, Any]], list[float]]]:
        """Run directory -> (its records, their stamps), for every run seen."""
        return {p.parent: (self.records.get(p, []), self.stamps.get(p, [])) for p in self.offsets}

    def save(self, path: Path) -> None:
        """The stamps of every record, by metrics file (to re-read the runs later)."""
        path.write_text(json.dumps({str(p): s for p, s in self.stamps.items()}) + "\n")
