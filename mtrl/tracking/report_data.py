"""What ``mtrl report`` reads from a run directory: its metric records and its episodes.

A resumed run appends to its ``metrics.jsonl`` from the checkpoint's step, after cutting what
was logged past that checkpoint (:mod:`mtrl.tracking.resume_trim`). Run directories resumed
before that cut existed hold the abandoned stretch twice; :func:`load_run` keeps the
continuation and drops it, so curves go on where they stopped (its ``episodes.csv``
likewise, :func:`mtrl.tracking.episodes.read_episodes`).
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from mtrl.errors import UserError
from mtrl.tracking.episodes import FILENAME as EPISODES_FILE
from mtrl.tracking.episodes import Episodes, read_episodes

STEPS = "charts/env_steps"
TASK_STEPS = "task/{task}/env_steps"
ELAPSED = "charts/elapsed_s"


@dataclass
class RunData:
    """The records of one run, in order, its task names and each task's episodes (if kept)."""

    path: Path
    records: list[dict[str, Any]]
    tasks: list[str] = field(default_factory=list)
    episodes: dict[str, Episodes] = field(default_factory=dict)
    targets: dict[str, float] = field(default_factory=dict)
    """Each task's ``target_score`` from the run's config.yaml, for the tasks that set one."""

    @property
    def label(self) -> str:
        return self.path.name

    def series(self, key: str, x: str = STEPS) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of the records that have a finite ``key`` and ``x``."""
        xs, ys = [], []
        for r in self.records:
            a, b = r.get(x), r.get(key)
            if _finite(a) and _finite(b):
                xs.append(float(a))
                ys.append(float(b))
        return np.asarray(xs), np.asarray(ys)

    def has(self, key: str) -> bool:
        return any(_finite(r.get(key)) for r in self.records)

    def task_x(self, task: str) -> str:
        """The x key of ``task``'s curves against steps: its own env steps when logged."""
        key = TASK_STEPS.format(task=task)
        return key if self.has(key) else STEPS

    def last(self, key: str) -> float | None:
        """The latest finite value of ``key``; None when it never had one."""
        for r in reversed(self.records):
            if _finite(r.get(key)):
                return float(r[key])
        return None


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _drop_abandoned(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """After a resume, env steps go back: drop the earlier records at or past that point."""
    out: list[dict[str, Any]] = []
    for r in records:
        steps = r.get(STEPS)
        if _finite(steps):
            while out and _finite(out[-1].get(STEPS)) and out[-1][STEPS] >= steps:
                out.pop()
        out.append(r)
    return out


def _config_tasks(run_dir: Path) -> list[dict[str, Any]]:
    """The ``tasks`` of the run's config.yaml (none, with a warning, when it is unreadable)."""
    cfg_path = run_dir / "config.yaml"
    if not cfg_path.is_file():
        return []
    try:
        tasks = (yaml.safe_load(cfg_path.read_text(encoding="utf-8")) or {}).get("tasks", [])
        if isinstance(tasks, list) and all(isinstance(t, dict) and "env" in t for t in tasks):
            return tasks
    except (yaml.YAMLError, AttributeError):
        pass
    warnings.warn(f"{cfg_path}: unreadable; task names come from the metrics", stacklevel=2)
    return []


def _targets(tasks: list[dict[str, Any]]) -> dict[str, float]:
    """``{task name: target_score}`` of the config's tasks that set a finite one."""
    out = {}
    for t in tasks:
        target = t.get("target_score")
        if _finite(target):
            out[t.get("name") or t["env"]] = float(target)
    return out


def _task_names(tasks: list[dict[str, Any]], records: list[dict[str, Any]]) -> list[str]:
    """Task names from config.yaml in config order, then any others the metrics mention."""
    names: list[str] = [t.get("name") or t["env"] for t in tasks]
    for r in records:
        for key in r:
            for prefix in ("task/", "popart/", "scheduler/", "learner/"):
                if key.startswith(prefix) and key.count("/") >= 2:
                    name = key[len(prefix) : key.rindex("/")]
                    # not a task: the "<task>/faults" of task/<task>/faults/raise
                    nested = any(name.startswith(f"{n}/") for n in names)
                    if name not in names and not nested:
                        names.append(name)
    return names


def load_run(run_dir: Path | str) -> RunData:
    """Read a run directory's metrics (a truncated last line, from a crash, is skipped) and
    its episodes (none for runs older than ``episodes.csv``)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run directory")
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise UserError(f"{run_dir}: no metrics.jsonl here; is it a run directory?")
    records, bad = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(rec, dict):
            records.append(rec)
    if bad:
        warnings.warn(f"{path}: skipped {bad} unreadable line(s)", stacklevel=2)
    records = _drop_abandoned(records)
    episodes = read_episodes(run_dir / EPISODES_FILE)
    tasks = _config_tasks(run_dir)
    return RunData(run_dir, records, _task_names(tasks, records), episodes, _targets(tasks))
