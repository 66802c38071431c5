"""When the learner replicas of a torchrun job stop and checkpoint, and how far the run is.

Replicas must leave together (none may wait in a collective a peer never joins) and all take
part in a checkpoint (a sharded learner's state is gathered from every rank), so they decide
both jointly, summing their env steps, stop requests, reached targets and due checkpoints in
one small all-reduce. When they meet depends on ``learner.parallel.sync``:

- ``allreduce``: after every update (the update's own all-reduces keep them in step);
- ``local_sgd`` / ``diloco``: right after each sync, the only point the replicas share
  (:class:`~mtrl.sync.loose_sync.PeriodicSync` shortens the last periods so the run ends
  near its budget); between two, each replica counts the others as fast as itself;
- ``async``: never while training. Each replica stops alone once its estimate of the run's
  steps (its own and each peer's newest count, carried by the gossip) reaches the budget;
  rank 0 checkpoints alone; they meet once at the end
  (:meth:`~mtrl.sync.gossip.GossipSync.finish`).

Each mode says which of these it is through :class:`~mtrl.sync.replica_sync.ReplicaSync`
(``joint``, ``run_steps``, ``plan``): nothing here names a mode.
"""

from __future__ import annotations

from mtrl.learner.distributed import DistContext
from mtrl.sync.replica_sync import ReplicaSync

__all__ = ["ReplicaDecisions"]


class ReplicaDecisions:
    """The stop and checkpoint decisions of one replica (module docstring)."""

    def __init__(self, ctx: DistContext, sync: ReplicaSync | None, budget: int) -> None:
        self.ctx = ctx
        self.sync = sync
        self.budget = budget
        self.joint_steps = 0
        """All replicas' env steps at the last joint decision."""
        self._own_at_joint = 0
        self._meet = False

    def after_update(self, own_steps: int) -> None:
        """After every learner update: synchronise the replicas when due."""
        if self.sync is None or self.sync.after_update(own_steps):
            self._meet = True

    def run_steps(self, own_steps: int) -> int:
        """The run's env steps as this replica knows them (its own when alone)."""
        if not self.ctx.distributed:
            return own_steps
        if self.sync is None:
            return self.joint_steps
        return self.sync.run_steps(
            own_steps, self.joint_steps, self._own_at_joint, self.ctx.world_size
        )

    def decide(
        self, own_steps: int, stop_asked: bool, targets_reached: bool, checkpoint_due: bool
    ) -> tuple[bool, bool]:
        """(stop, save a checkpoint now), called once per round of the training loop."""
        if not self.ctx.distributed:
            return own_steps >= self.budget or stop_asked or targets_reached, checkpoint_due
        if self.sync is not None and not self.sync.joint:  # each replica decides alone
            stop = self.run_steps(own_steps) >= self.budget or stop_asked
            return stop or targets_reached, checkpoint_due  # due: rank 0 only
        if not self._meet:
            return False, False
        self._meet = False
        steps, stops, reached, save = self.ctx.all_sum(
            [own_steps, stop_asked, targets_reached, checkpoint_due]
        )
        self.joint_steps, self._own_at_joint = int(steps), own_steps
        if self.sync is not None:
            self.sync.plan(steps, self.budget)
        stop = steps >= self.budget or stops > 0 or reached >= self.ctx.world_size
        return stop, save > 0

    def finish(self, own_steps: int) -> None:
        """At the end of the run (every replica): the replicas end with one model."""
        if self.sync is not None:
            self.sync.finish(own_steps)
