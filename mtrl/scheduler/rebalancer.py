"""The rebalancing loop: task statistics in, actor counts out, every ``rebalance_every_s``.

The trainer feeds one :class:`Rebalancer` with what it sees (unrolls, deliveries to the
learner, episodes, failures) and asks :meth:`Rebalancer.decide` for the actor counts it should
run; the decision carries the policy's reason per task, for the log and the metrics. Only the
statistics and the clock live here: moving actors is the actor pool's job.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mtrl.config import ExperimentConfig
from mtrl.scheduler.records import Budget
from mtrl.scheduler.registry import get_policy
from mtrl.scheduler.stats import TaskStats, snapshot

if TYPE_CHECKING:
    from mtrl.plugins import Plugins


@dataclass(frozen=True)
class Decision:
    """Actors per task (config order), why, and target data shares (None: not set)."""

    counts: list[int]
    reasons: list[str]
    changed: bool
    shares: list[float | None]


def budget_for(cfg: ExperimentConfig, num_tasks: int | None = None) -> Budget:
    """The budget for ``num_tasks`` actor tasks (default: all the config's); at least
    ``max(1, min_actors_per_task)`` actors per task."""
    sc = cfg.scheduler
    floor = max(1, sc.min_actors_per_task)
    n = len(cfg.tasks) if num_tasks is None else num_tasks
    slots = max(sc.num_actors, floor * n)
    return Budget(slots=slots, min_per_task=floor, floor_share=sc.progress_floor)


class Rebalancer:
    """Per-task :class:`TaskStats` and the configured policy, consulted on a timer.

    ``actor_tasks`` are the tasks whose actors this process runs (default: all); the budget is
    shared among them only, and every other task (Anakin tasks stepped on the device, tasks
    another rank runs) is decided 0 actors and no target share.
    """

    def __init__(
        self, cfg: ExperimentConfig, plugins: Plugins, actor_tasks: Sequence[int] | None = None
    ) -> None:
        sc = cfg.scheduler
        self.names = [t.key for t in cfg.tasks]
        self.actor_tasks = list(range(len(cfg.tasks)) if actor_tasks is None else actor_tasks)
        self.every_s = sc.rebalance_every_s
        self.policy = get_policy(sc.policy, plugins)
        self.budget = budget_for(cfg, len(self.actor_tasks))
        self.stats = []
        for task in cfg.tasks:
            spec = plugins.envs.get(task.env)
            self.stats.append(
                TaskStats(
                    task.key,
                    task.weight,
                    target=_target(spec, task.target_score),
                    window=sc.stats_window,
                    warmup_s=sc.warmup_s,
                    progress_window=sc.progress_window,
                    max_failures=None,  # quarantine is the actor pool's call
                )
            )
        self._normalize = [plugins.envs.get(t.env).normalized_score for t in cfg.tasks]
        self._last = time.monotonic()

    def initial(self) -> Decision:
        """The allocation before any statistics exist (the policy's warm-up split)."""
        return self._decide([0] * len(self.names))

    def observe_unroll(self, task: int, env_steps: int, seconds: float, step_s: float) -> None:
        s = self.stats[task]
        if seconds > 0:
            s.observe_unroll(env_steps, seconds)
        if step_s > 0:
            s.observe_step_times([step_s])

    def observe_members(self, task: int, members: int) -> None:
        """Members present in the task's batch envs (attached codes that join and leave)."""
        self.stats[task].members = members

    def observe_delivered(self, task: int, env_steps: int) -> None:
        self.stats[task].observe_delivered(env_steps)

    def observe_episodes(self, task: int, returns: Sequence[float]) -> None:
        for r in returns:
            norm = self._normalize[task](r)
            self.stats[task].observe_episode(r if norm is None else norm)

    def observe_failure(self, task: int, lost_s: float = 0.0) -> None:
        self.stats[task].observe_failure(lost_s)

    def quarantine(self, task: int) -> None:
        if not self.stats[task].quarantined:
            self.stats[task].quarantine()

    def set_slots(self, slots: int) -> None:
        """Resize the budget (a Ray cluster's nodes came or went); the next decision uses it.
        Never below the per-task floor."""
        floor = self.budget.min_per_task * len(self.actor_tasks)
        self.budget = replace(self.budget, slots=max(slots, floor, 1))

    def decide(self, current: list[int], force: bool = False) -> Decision | None:
        """A new decision when ``rebalance_every_s`` has passed (or ``force``), else None."""
        now = time.monotonic()
        if not force and now - self._last < self.every_s:
            return None
        self._last = now
        return self._decide(current)

    def _decide(self, current: list[int]) -> Decision:
        stats = [self.stats[i] for i in self.actor_tasks]
        records = snapshot(stats, {self.names[i]: current[i] for i in self.actor_tasks})
        alloc = self.policy(records, self.budget) if records else None
        counts, reasons, shares = [0] * len(self.names), [""] * len(self.names), []
        for i, n in enumerate(self.names):
            if alloc is not None and i in self.actor_tasks:
                counts[i], reasons[i] = int(alloc[n]), alloc.reasons.get(n, "")
            shares.append(alloc.shares.get(n) if alloc is not None else None)
        return Decision(counts, reasons, counts != list(current), shares)


def _target(spec: Any, target_score: float | None) -> float | None:
    """A task's target in the units its scores are fed in (normalised when the spec can)."""
    if spec.normalized_score(0.0) is None:
        return target_score
    if target_score is None:
        return 1.0
    return spec.normalized_score(target_score)
