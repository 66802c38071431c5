"""What each member of a population trained with, interval by interval: written by the member
into its run directory (``tune.jsonl``), read back by ``mtrl report`` on the population's
directory. Imports no Ray: a report needs only the files.

One record per interval: the env steps at its end, the member's score there, the
hyperparameters it trained with, whether its trainer started anew for it, and — on the first
interval after an exploit — the member whose checkpoint it copied. The checkpoint a member
reports carries the member's name (``member.json``), so the member that restores it knows
whose it was.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "HISTORY_FILE",
    "Interval",
    "MemberHistory",
    "is_population",
    "member_run_dir",
    "read_origin",
    "read_population",
    "record_interval",
    "write_origin",
]

HISTORY_FILE = "tune.jsonl"
ORIGIN_FILE = "member.json"


@dataclass(frozen=True)
class Interval:
    """One interval of one member."""

    env_steps: int
    score: float
    hyperparameters: dict[str, Any]
    copied_from: str | None = None
    started: bool = False
    """Whether the member's trainer (and its actors) started for this interval: true on the
    first interval after Ray Tune (re)started the member, false where it trained on."""


@dataclass
class MemberHistory:
    """A member's trial name, its mtrl run directory, and its intervals in order."""

    trial: str
    run_dir: Path
    intervals: list[Interval] = field(default_factory=list)

    @property
    def label(self) -> str:
        """Short name: the trial's index in the population (``member 3``)."""
        return member_label(self.trial)


def member_label(trial: str) -> str:
    """``train_member_ee569_00003_3_lr=...`` → ``member 3``; other names unchanged."""
    parts = trial.split("_")
    if len(parts) >= 5 and parts[0] == "train" and parts[4].isdigit():
        return f"member {parts[4]}"
    return trial


def record_interval(run_dir: Path, interval: Interval) -> None:
    """Append ``interval`` to the member's history in ``run_dir``."""
    with (run_dir / HISTORY_FILE).open("a") as f:
        f.write(json.dumps(asdict(interval)) + "\n")


def write_origin(checkpoint_dir: Path, trial: str) -> None:
    """Mark a checkpoint the member ``trial`` reports as its own."""
    (checkpoint_dir / ORIGIN_FILE).write_text(json.dumps({"trial": trial}))


def read_origin(checkpoint_dir: Path) -> str | None:
    """The member whose checkpoint this is (None for a checkpoint without the mark)."""
    path = checkpoint_dir / ORIGIN_FILE
    return json.loads(path.read_text())["trial"] if path.exists() else None


def member_run_dir(trial_dir: Path) -> Path | None:
    """The member's mtrl run directory under its trial directory (``run/``; the newest, were
    there several), or None before it is made."""
    runs = sorted(p for p in (trial_dir / "run").glob("*") if p.is_dir())
    return runs[-1] if runs else None


def _member_runs(experiment: Path) -> list[tuple[str, Path]]:
    """(trial name, run directory) of each member under a population's directory."""
    trials = sorted(p for p in experiment.iterdir() if p.is_dir())
    return [(t.name, run) for t in trials if (run := member_run_dir(t)) is not None]


def is_population(path: Path) -> bool:
    """Whether ``path`` is an ``mtrl tune`` population's directory (its members' runs below)."""
    return path.is_dir() and any((run / HISTORY_FILE).exists() for _, run in _member_runs(path))


def read_population(experiment: Path) -> list[MemberHistory]:
    """Every member's history, in trial order (a half-written last line is skipped)."""
    members = []
    for trial, run in _member_runs(experiment):
        history = MemberHistory(trial, run)
        path = run / HISTORY_FILE
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                history.intervals.append(Interval(**json.loads(line)))
            except (json.JSONDecodeError, TypeError):
                continue
        members.append(history)
    return members
