"""What each unroll that reaches the trainer tells the run, counted as it arrives.

An actor's unroll (a :class:`~mtrl.actors.server.ReadyUnroll`) adds its env steps, env seconds
and finished episodes to its task's :class:`~mtrl.train.progress.TaskProgress`; the faults and
comings and goings of its simulation members are printed, one line each; the scheduler observes
the task's speed, returns and members; the liveness watch notes the unroll's time; and every
finished episode goes to the trackers (``episodes.csv``, for the report's curves). Anakin's
runners keep their finished episodes on the device until the trainer drains them after an
update; they are counted the same way.

The trainer takes unrolls in from its loop and, while the learner waits for the actors'
inserts into sharded replay, from the learner's wait hook; both come through
:meth:`UnrollIntake.accept`, before the trainer's ``on_unroll`` and the update.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mtrl.actors.server import ReadyUnroll
    from mtrl.anakin import AnakinRunner
    from mtrl.scheduler import Rebalancer
    from mtrl.tracking.sinks import SinkGroup
    from mtrl.train.liveness import Liveness
    from mtrl.train.progress import TaskProgress

__all__ = ["UnrollIntake"]


class UnrollIntake:
    """Counts arriving unrolls and Anakin's episodes into a run's progress, scheduler,
    liveness watch and trackers (module docstring)."""

    def __init__(
        self,
        names: Sequence[str],
        progress: Sequence[TaskProgress],
        rebalancer: Rebalancer,
        liveness: Liveness,
        tracker: SinkGroup,
    ) -> None:
        self.names = names
        self.progress = progress
        self.rebalancer = rebalancer
        self.liveness = liveness
        self.tracker = tracker
        self.zero_s = time.perf_counter()
        """The clock (``time.perf_counter``) at ``charts/elapsed_s`` = 0, which the episodes'
        wall times count from; the trainer sets it as each :meth:`~mtrl.train.trainer.Trainer.run`
        starts."""

    def accept(self, ru: ReadyUnroll) -> None:
        """Count one actor's unroll (module docstring)."""
        p, info = self.progress[ru.task], ru.info
        # Seconds the actor spent on this unroll (stepping and inference waits), not the
        # waits for a free slot: the share gate makes those, and they are not its speed.
        step_s = info.env_seconds / max(ru.buffer.length, 1)
        self.rebalancer.observe_unroll(ru.task, info.env_steps, info.wall_seconds, step_s)
        self.liveness.stall.unroll(info.wall_seconds)
        self.rebalancer.observe_episodes(ru.task, info.episode_returns)
        p.env_steps += info.env_steps
        p.env_seconds += info.env_seconds
        p.count_episodes(info.episode_returns, info.episode_lengths, info.episode_successes)
        for line in p.count_member_faults(ru.actor_id, info.member_faults, self.names[ru.task]):
            print(line)
        name = self.names[ru.task]
        events, present = info.member_events, info.members_present
        for line in p.count_member_events(ru.actor_id, events, present, name):
            print(line)
        if p.members is not None:
            self.rebalancer.observe_members(ru.task, p.members)
        self.tracker.add_episodes(  # episodes.csv: every episode, for the report's curves
            self.names[ru.task],
            p.env_steps,
            info.episode_returns,
            info.episode_lengths,
            time.perf_counter() - self.zero_s,
        )

    def anakin_episodes(self, runners: Sequence[AnakinRunner]) -> None:
        """Move the finished Anakin episodes (kept on the device) into their tasks' counters."""
        for runner in runners:
            returns, lengths, successes = runner.episodes.drain()
            p = self.progress[runner.task]
            p.count_episodes(returns, lengths, successes)
            wall = time.perf_counter() - self.zero_s
            self.tracker.add_episodes(self.names[runner.task], p.env_steps, returns, lengths, wall)
            self.rebalancer.observe_episodes(runner.task, returns)
