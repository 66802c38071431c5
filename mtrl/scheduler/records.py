"""The scheduler's data: what it knows about each task, what it may spend, what it decides.

Plain frozen values so a policy is a pure function of them and a decision can be logged,
replayed and tested without a running system.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mtrl.config.models import SchedulerConfig


@dataclass(frozen=True)
class TaskRecord:
    """One task's state as the scheduler sees it (built by :class:`mtrl.scheduler.TaskStats`).

    Rates and spreads are robust estimates over a recent window, ``None`` until measured.
    Scores are normalised (random = 0, reference = 1) when the env declares its scores, so
    that gaps and slopes compare across tasks.
    """

    name: str
    """Unique task name (the config's task key)."""
    weight: float
    """Configured relative share of learner samples (not normalised)."""
    actors: int = 0
    """Actors currently working on this task."""
    steps_per_s: float | None = None
    """Env steps per second one actor delivers (robust average, includes inference waits)."""
    step_time_spread: float | None = None
    """Jitter of step times: interquartile range over median (0 = perfectly regular)."""
    delivered: int = 0
    """Env steps of this task delivered to the learner so far."""
    data_share: float = 0.0
    """This task's fraction of all env steps delivered to the learner so far."""
    score: float | None = None
    """Recent mean episode score (normalised when the env allows it)."""
    target: float | None = None
    """Score at which the task counts as solved, in the same units as ``score``."""
    progress: float | None = None
    """Learning progress: slope of recent scores per million env steps of this task."""
    failures: int = 0
    """Actor failures (crashes, hangs) on this task so far."""
    quarantined: bool = False
    """Too many failures: the task gets no actors and the run goes on without it."""
    warm: bool = False
    """Past warm-up with enough samples for ``steps_per_s`` to be trusted."""
    members: int | None = None
    """Simulation codes present in the task's batch envs, summed over its actors, where
    attached codes join and leave (an external env's ``members_dir``); None elsewhere."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("TaskRecord.name must be non-empty")
        if not (math.isfinite(self.weight) and self.weight > 0):
            raise ValueError(f"{self.name}: weight must be positive and finite, got {self.weight}")
        if self.actors < 0 or self.delivered < 0 or self.failures < 0:
            raise ValueError(f"{self.name}: actors, delivered and failures must be >= 0")
        if self.warm and not (self.steps_per_s is not None and self.steps_per_s > 0):
            raise ValueError(f"{self.name}: a warm record needs a positive steps_per_s")


@dataclass(frozen=True)
class Budget:
    """What a policy may spend and the floors it must respect."""

    slots: int
    """Actor slots to hand out in total; an allocation spends exactly this many (unless every
    task is quarantined)."""
    min_per_task: int = 1
    """Floor of actors for every task that is not quarantined, so none is starved or
    forgotten. Lowered to ``slots // tasks`` when the budget cannot honour it."""
    floor_share: float = 0.25
    """Adaptive policies (``progress``) keep each task's data share at least this fraction of
    its weight share."""

    def __post_init__(self) -> None:
        if self.slots < 0 or self.min_per_task < 0:
            raise ValueError(f"Budget slots and min_per_task must be >= 0, got {self}")
        if not 0.0 <= self.floor_share <= 1.0:
            raise ValueError(f"Budget.floor_share must be in [0, 1], got {self.floor_share}")

    @classmethod
    def from_config(cls, cfg: SchedulerConfig, slots: int | None = None) -> Budget:
        """The budget a run's scheduler config gives (``slots`` overrides ``num_actors``)."""
        return cls(
            slots=cfg.num_actors if slots is None else slots,
            min_per_task=cfg.min_actors_per_task,
            floor_share=cfg.progress_floor,
        )


@dataclass(frozen=True)
class Allocation(Mapping[str, int]):
    """Actors per task, with a one-line reason per task for logs. Reads like a dict."""

    actors: Mapping[str, int]
    """Task name → actor count."""
    reasons: Mapping[str, str] = field(default_factory=dict)
    """Task name → why it got that many (for logs and debugging)."""
    shares: Mapping[str, float] = field(default_factory=dict)
    """Task name → target share of learner samples, for policies that set one (``balanced``,
    ``progress``; not ``fixed``). The learner's share gate (:mod:`mtrl.train.share_gate`)
    holds back unrolls of tasks ahead of it; tasks left out are not held."""

    def __getitem__(self, name: str) -> int:
        return self.actors[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.actors)

    def __len__(self) -> int:
        return len(self.actors)

    @property
    def total(self) -> int:
        """Actors handed out."""
        return sum(self.actors.values())


class Policy(Protocol):
    """An allocation policy: a pure function of task records and a budget."""

    def __call__(self, records: Sequence[TaskRecord], budget: Budget, /) -> Allocation: ...
