"""The Anakin training step and a minimal loop: rollout and update with no host copies.

:func:`anakin_train_step` is what a trainer calls; :func:`train_anakin` is a self-contained
loop for Anakin-only runs, benchmarks and tests. The learner's metrics (a few ``.item()``
scalars per update) are the only per-update host syncs; episode statistics sync when drained.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from mtrl.anakin.runner import AnakinRunner
from mtrl.learner.protocol import Learner


def anakin_train_step(runners: Sequence[AnakinRunner], learner: Learner) -> dict[str, float]:
    """Collect one unroll from every runner with the current weights, then one update."""
    batches = [r.collect(learner.model, learner.version) for r in runners]
    return learner.update(batches)


@dataclass
class AnakinResult:
    """How an Anakin run went: totals and the recent episodes of each task."""

    env_steps: int
    updates: int
    seconds: float
    episodes: list[int] = field(default_factory=list)
    recent_returns: list[list[float]] = field(default_factory=list)

    @property
    def steps_per_second(self) -> float:
        return self.env_steps / max(self.seconds, 1e-9)

    def mean_recent_return(self, task: int = 0) -> float | None:
        r = self.recent_returns[task]
        return sum(r) / len(r) if r else None


def train_anakin(
    runners: Sequence[AnakinRunner],
    learner: Learner,
    total_env_steps: int,
    *,
    drain_every: int = 10,
    recent: int = 20,
    target_return: float | None = None,
) -> AnakinResult:
    """Train until ``total_env_steps`` (all tasks together), or until every task's mean over its
    last ``recent`` episodes reaches ``target_return``; episodes are drained (host sync) every
    ``drain_every`` updates.

    On a small shared CPU call ``torch.set_num_threads(1)`` first, as the trainer does
    (``learner.torch_threads``): two threads on a loaded 2-core machine ran 10x slower.
    """
    windows: list[deque[float]] = [deque(maxlen=recent) for _ in runners]
    counts = [0] * len(runners)
    updates = 0
    start = time.perf_counter()

    def env_steps() -> int:
        return sum(r.env_steps for r in runners)

    while env_steps() < total_env_steps:
        anakin_train_step(runners, learner)
        updates += 1
        if updates % drain_every:
            continue
        for i, r in enumerate(runners):
            returns, *_ = r.episodes.drain()
            windows[i].extend(returns)
            counts[i] += len(returns)
        if target_return is not None and all(
            len(w) == recent and sum(w) / recent >= target_return for w in windows
        ):
            break
    for i, r in enumerate(runners):
        returns, *_ = r.episodes.drain()
        windows[i].extend(returns)
        counts[i] += len(returns)
    return AnakinResult(
        env_steps=env_steps(),
        updates=updates,
        seconds=time.perf_counter() - start,
        episodes=counts,
        recent_returns=[list(w) for w in windows],
    )
