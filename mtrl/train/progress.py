"""Per-task progress of a training run: counters fed by unrolls, and the results reported."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mtrl.actors.faults import TaskFaults
    from mtrl.config.models import TaskConfig
    from mtrl.plugins import EnvSpec

RECENT_EPISODES = 20


@dataclass
class TaskResult:
    """How one task ended: recent mean return (unscaled), normalised score and, after the final
    greedy evaluation (:mod:`mtrl.train.final_eval`), its mean return."""

    name: str
    env_steps: int
    episodes: int
    mean_return: float | None
    normalized_score: float | None
    target_score: float | None
    greedy_eval: float | None = None
    faults: int = 0
    """Actor failures of every kind (a task with none may still have made no steps)."""
    last_error: str = ""
    """The newest actor failure's message (or why the task was quarantined, if none)."""
    quarantined: bool = False
    success_rate: float | None = None
    """Share of the recent episodes that succeeded, where the env reports success."""
    no_steps_reason: str = ""
    """Why a task that made no env steps made none, where the actors know (its actors found
    no room in the Ray cluster); empty otherwise."""

    @property
    def solved(self) -> bool | None:
        """At target: the training return and, when it ran, the greedy evaluation too."""
        if self.target_score is None or self.mean_return is None:
            return None
        greedy_ok = self.greedy_eval is None or self.greedy_eval >= self.target_score
        return self.mean_return >= self.target_score and greedy_ok


@dataclass
class TrainResult:
    run_dir: Path | None
    env_steps: int
    updates: int
    seconds: float
    tasks: list[TaskResult] = field(default_factory=list)
    greedy_episodes: int = 0
    """Episodes per task of the final greedy evaluation (0: none ran)."""
    start_env_steps: int = 0
    """The run's env steps when this session began (a resumed run's earlier sessions)."""

    @property
    def session_env_steps(self) -> int:
        """Env steps made in this session: what ``steps_per_s`` counts."""
        return self.env_steps - self.start_env_steps

    @property
    def steps_per_s(self) -> float:
        """This session's env steps per wall second (earlier sessions' steps excluded)."""
        return self.session_env_steps / self.seconds if self.seconds > 0 else 0.0


@dataclass
class TaskProgress:
    """Running counters of one task, fed by the unrolls that reach the trainer."""

    env_steps: int = 0
    episodes: int = 0
    returns: deque = field(default_factory=lambda: deque(maxlen=RECENT_EPISODES))
    lengths: deque = field(default_factory=lambda: deque(maxlen=RECENT_EPISODES))
    successes: deque = field(default_factory=lambda: deque(maxlen=RECENT_EPISODES))
    env_seconds: float = 0.0  # inside env.step, summed over actors
    samples: int = 0  # env steps delivered to the learner

    member_faults: dict[str, int] = field(default_factory=dict)  # by kind
    members_quarantined: int = 0
    member_fault_counts: dict[tuple[int, int], int] = field(default_factory=dict)
    """Failures per (actor, member): the per-member fault metrics."""

    def count_member_faults(self, actor: int, faults: Sequence[tuple], task: str) -> list[str]:
        """Count single-member failures of one of ``actor``'s unrolls (``UnrollInfo``'s
        ``member_faults``); the lines that report them, one per failure."""
        lines = []
        for member, start, stop, kind, text, quarantined in faults:
            self.member_faults[kind] = self.member_faults.get(kind, 0) + 1
            key = (actor, member)
            self.member_fault_counts[key] = self.member_fault_counts.get(key, 0) + 1
            copies = f"copy {start}" if stop - start == 1 else f"copies {start}-{stop - 1}"
            if quarantined:
                self.members_quarantined += 1
                lines.append(
                    f"WARNING: member {member} ({copies}) of actor {actor} of task {task!r} "
                    f"quarantined after {self.member_fault_counts[key]} failures ({kind}): its "
                    f"copies are masked out, the batch's other members keep training: {text}"
                )
            else:
                lines.append(
                    f"member {member} ({copies}) of actor {actor} of task {task!r} failed "
                    f"({kind}), restarted alone: {text}"
                )
        return lines

    member_events: dict[str, int] = field(default_factory=dict)  # joins, leaves, vanished
    members_present: dict[int, int] = field(default_factory=dict)
    """Members present in each actor's batch env (where members join and leave)."""

    def count_member_events(
        self, actor: int, events: Sequence[tuple], present: int | None, task: str
    ) -> list[str]:
        """Count the joins and leaves of one of ``actor``'s unrolls (``UnrollInfo``'s
        ``member_events``) and its members present; the lines that report them."""
        if present is not None:
            self.members_present[actor] = present
        lines = []
        for kind, member, start, stop, text in events:
            self.member_events[kind] = self.member_events.get(kind, 0) + 1
            copies = f"copy {start}" if stop - start == 1 else f"copies {start}-{stop - 1}"
            how = {"join": "joined", "leave": "left (goodbye)", "vanished": "vanished"}[kind]
            lines.append(
                f"member {member} ({copies}) of actor {actor} of task {task!r} {how}: {text}"
            )
        return lines

    @property
    def members(self) -> int | None:
        """Members present in the task's batch envs, summed over its actors (None where
        members do not join and leave)."""
        return sum(self.members_present.values()) if self.members_present else None

    def member_metrics(self) -> dict[str, float]:
        """``member_faults``, ``member_faults/<kind>``, ``members_quarantined`` and
        ``member/<actor>.<member>/faults`` (only once a member failed); ``members``,
        ``member_joins``, ``member_leaves`` and ``member_vanished`` where members join and
        leave."""
        out: dict[str, float] = {}
        if self.members is not None:
            out["members"] = self.members
            for kind, key in (("join", "joins"), ("leave", "leaves"), ("vanished", "vanished")):
                out[f"member_{key}"] = self.member_events.get(kind, 0)
        if not self.member_faults:
            return out
        out["member_faults"] = sum(self.member_faults.values())
        out.update({f"member_faults/{k}": n for k, n in self.member_faults.items()})
        out["members_quarantined"] = self.members_quarantined
        out.update({f"member/{a}.{m}/faults": n for (a, m), n in self.member_fault_counts.items()})
        return out

    def count_episodes(
        self, returns: Sequence[float], lengths: Sequence[int], successes: Sequence[bool]
    ) -> None:
        """Count episodes that ended (``successes`` empty where the env reports none)."""
        self.episodes += len(returns)
        self.returns.extend(returns)
        self.lengths.extend(lengths)
        self.successes.extend(successes)


def task_results(
    tasks: Sequence[TaskConfig],
    specs: Sequence[EnvSpec],
    progress: Sequence[TaskProgress],
    faults: Sequence[TaskFaults] | None = None,
) -> list[TaskResult]:
    """Each task's result so far: mean of its recent returns, normalised where the env can,
    and its actor faults (``faults``: the pool's per-task records), so that a task that made
    no steps says why."""
    out = []
    for i, (task, spec, p) in enumerate(zip(tasks, specs, progress, strict=True)):
        mean = float(np.mean(p.returns)) if p.returns else None
        f = faults[i] if faults is not None else None
        out.append(
            TaskResult(
                name=task.key,
                env_steps=p.env_steps,
                episodes=p.episodes,
                mean_return=mean,
                normalized_score=spec.normalized_score(mean) if mean is not None else None,
                target_score=task.target_score,
                faults=f.faults if f else 0,
                last_error=(f.last_error or f.reason) if f else "",
                quarantined=f.quarantined if f else False,
                success_rate=float(np.mean(p.successes)) if p.successes else None,
            )
        )
    return out


def task_metrics(
    results: Sequence[TaskResult],
    progress: Sequence[TaskProgress],
    faults: Sequence[dict[str, float]],
    actors: Sequence[int],
) -> dict[str, float]:
    """The per-task part of a metrics record: counters, returns, faults, actors."""
    record: dict[str, float] = {}
    for r, p, f, n in zip(results, progress, faults, actors, strict=True):
        record[f"task/{r.name}/env_steps"] = r.env_steps
        record[f"task/{r.name}/episodes"] = r.episodes
        for key, value in f.items():
            record[f"task/{r.name}/{key}"] = value
        for key, value in p.member_metrics().items():
            record[f"task/{r.name}/{key}"] = value
        record[f"scheduler/{r.name}/actors"] = n
        if p.env_seconds > 0:
            record[f"task/{r.name}/env_sps"] = p.env_steps / p.env_seconds
        if r.mean_return is not None:
            record[f"task/{r.name}/return"] = r.mean_return
            record[f"task/{r.name}/episode_length"] = float(np.mean(p.lengths))
        if r.normalized_score is not None:
            record[f"task/{r.name}/normalized_score"] = r.normalized_score
        if r.success_rate is not None:
            record[f"task/{r.name}/success"] = r.success_rate
    return record
