"""What a way of synchronising learner replicas offers the trainer (``learner.parallel.sync``).

The trainer's stop and checkpoint decisions (:class:`mtrl.train.replica_decisions.
ReplicaDecisions`) need three things of a sync mode, whatever it is: whether the replicas meet
at its sync points (``joint``: they then decide together there) or never while training (each
decides alone), the run's env steps as one replica knows them between meetings, and, at a
meeting, the chance to plan the next one. :class:`~mtrl.sync.loose_sync.PeriodicSync`
(``local_sgd``, ``diloco``) and :class:`~mtrl.sync.gossip.GossipSync` (``async``) meet this
protocol; ``allreduce`` needs none (the learner all-reduces every update itself). A new sync
mode is a class with these members, made by :func:`mtrl.sync.loose_sync.make_loose_sync`.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ReplicaSync"]


class ReplicaSync(Protocol):
    """A sync mode among torchrun learner replicas (module docstring)."""

    joint: bool
    """True: the replicas meet at each sync point and decide together there; False: they never
    meet while training, each stops alone on its own estimate of the run's steps."""

    def after_update(self, env_steps: int) -> bool:
        """After every learner update (``env_steps``: this replica's so far): synchronise when
        due; True where this is a point all replicas meet at."""
        ...

    def run_steps(self, own_steps: int, joint_steps: int, own_at_joint: int, replicas: int) -> int:
        """The run's env steps as this replica knows them: from its own (``own_steps``), all
        replicas' at the last meeting (``joint_steps``, when it had ``own_at_joint``) and the
        number of ``replicas``."""
        ...

    def plan(self, global_steps: float, budget: float) -> None:
        """At a meeting, with all replicas' env steps so far: when to meet next."""
        ...

    def finish(self, env_steps: int) -> None:
        """At the end of the run: leave every replica with one model."""
        ...

    def close(self) -> None:
        """Let go of what it holds (sockets, threads)."""
        ...

    def metrics(self) -> dict[str, float]:
        """Its counters, for the run's metrics."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of it."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`."""
        ...
