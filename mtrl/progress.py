"""Per-task progress of a training run: counters fed by unrolls, and the results reported."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

RECENT_EPISODES = 20


@dataclass
class TaskResult:
    """How one task ended: recent mean return (unscaled) and normalised score."""

    name: str
    env_steps: int
    episodes: int
    mean_return: float | None
    normalized_score: float | None
    target_score: float | None

    @property
    def solved(self) -> bool | None:
        if self.target_score is None or self.mean_return is None:
            return None
        return self.mean_return >= self.target_score


@dataclass
class TrainResult:
    run_dir: Path | None
    env_steps: int
    updates: int
    seconds: float
    tasks: list[TaskResult] = field(default_factory=list)


@dataclass
class TaskProgress:
    """Running counters of one task, fed by the unrolls that reach the trainer."""

    env_steps: int = 0
    episodes: int = 0
    returns: deque = field(default_factory=lambda: deque(maxlen=RECENT_EPISODES))
    lengths: deque = field(default_factory=lambda: deque(maxlen=RECENT_EPISODES))
    env_seconds: float = 0.0  # inside env.step, summed over actors
    samples: int = 0  # env steps delivered to the learner
