"""Replicas that learn alone between synchronisations: ``learner.parallel.sync: local_sgd`` and
``diloco`` (:class:`PeriodicSync`); ``async`` is :class:`mtrl.sync.gossip.GossipSync`.

With ``sync: allreduce`` every update waits for an all-reduce of the gradients across all
replicas, so one slow link or one slow replica slows every learner. Here each replica takes
its own optimiser steps on its own actors' batches, and every H (``sync_every``) updates the
replicas combine their :class:`~mtrl.sync.replica_state.ReplicaState` in one all-reduce:

- ``local_sgd``: the replicas' mean parameters (Lin et al. 2020, "Don't use large mini-batches,
  use local SGD"); with H = 1 and a linear optimiser (``optimizer: sgd``) this is exactly the
  all-reduce learner;
- ``diloco`` (Douillard et al. 2023): the mean of the replicas' parameter changes since the
  last sync, Δ = anchor − θ_r, is an outer gradient; an outer SGD step with Nesterov momentum
  moves the anchor (:func:`~mtrl.sync.replica_state.outer_step`), and every replica
  continues from it with its own inner optimiser state.

Both average the per-task statistics with the parameters and OR the seen flags (the
replica_state module says how PopArt's heads stay consistent). The replicas reach each sync at
the same update count, so the trainer takes its joint decisions (stop, checkpoint) there and
nowhere else: :func:`next_period` shortens the last periods so the run still ends near its
step budget.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from mtrl.sync.average import average_replica_states
from mtrl.sync.gossip import GossipSync
from mtrl.sync.replica_state import Reconcilable, outer_step
from mtrl.sync.replica_sync import ReplicaSync

if TYPE_CHECKING:
    from mtrl.config import ParallelConfig
    from mtrl.learner.distributed import DistContext

__all__ = ["PeriodicSync", "make_loose_sync", "next_period", "ring_allreduce_bytes"]


def next_period(every: int, remaining_steps: float, steps_per_update: float) -> int:
    """Updates until the next sync: ``every``, or fewer when the budget's remaining env steps
    (all replicas') would be spent sooner at ``steps_per_update`` (all replicas' per update of
    each), so the run's last joint decision comes near its budget; at least 1."""
    if steps_per_update <= 0 or remaining_steps <= 0:
        return 1 if remaining_steps <= 0 else every
    return max(1, min(every, math.ceil(remaining_steps / steps_per_update)))


def ring_allreduce_bytes(payload: int, replicas: int) -> int:
    """Bytes one replica sends in a ring all-reduce of ``payload`` bytes: 2 (N − 1) / N of it
    (reduce-scatter, then all-gather). A model of what the links carry; the slow-link
    benchmark counts the bytes on the interfaces."""
    return 0 if replicas <= 1 else int(2 * (replicas - 1) * payload / replicas)


class PeriodicSync:
    """``local_sgd`` or ``diloco`` over an initialised process group (module docstring)."""

    joint = True
    """The replicas meet at each sync: joint decisions are taken there."""

    def __init__(
        self,
        learner: Reconcilable,
        ctx: DistContext,
        every: int,
        outer_lr: float = 1.0,
        outer_momentum: float = 0.0,
    ) -> None:
        self.learner = learner
        self.ctx = ctx
        self.every = every
        self.outer_lr = outer_lr
        self.outer_momentum = outer_momentum
        self.averaging = outer_lr == 1.0 and outer_momentum == 0.0  # local SGD: the mean
        start = learner.replica_state()
        self.anchor = None if self.averaging else start.params.clone()
        self.momentum = None if self.averaging else torch.zeros_like(start.params)
        self.next_at = self._version + every
        self.syncs = 0
        self.bytes_sent = 0
        """Bytes this replica sent in syncs (:func:`ring_allreduce_bytes` of the payload)."""
        self._last = (0.0, self._version)  # (all replicas' env steps, version) at the last plan

    @property
    def _version(self) -> int:
        return int(getattr(self.learner, "version", 0))

    def after_update(self, env_steps: int) -> bool:
        """Synchronise when this update ends a period; True then (a joint point)."""
        if self._version < self.next_at:
            return False
        self.synchronise()
        return True

    def synchronise(self) -> None:
        """Combine the replicas' states (a collective: every replica calls it)."""
        state = self.learner.replica_state()
        n = self.ctx.world_size
        if self.anchor is not None and self.momentum is not None:  # diloco
            self.anchor = self.anchor.to(state.params.device)
            self.momentum = self.momentum.to(state.params.device)
            state.params = self.anchor - state.params  # this replica's change, averaged below
        average_replica_states(state, n)
        if self.anchor is not None and self.momentum is not None:
            self.anchor, self.momentum = outer_step(
                self.anchor, self.momentum, state.params, self.outer_lr, self.outer_momentum
            )
            state.params = self.anchor.clone()
        self.learner.load_replica_state(state)
        self.syncs += 1
        self.bytes_sent += ring_allreduce_bytes(state.numel_bytes(), n)
        self.next_at = self._version + self.every

    def run_steps(self, own_steps: int, joint_steps: int, own_at_joint: int, replicas: int) -> int:
        """Between two syncs, every replica counted as fast as this one since the last."""
        return joint_steps + replicas * (own_steps - own_at_joint)

    def plan(self, global_steps: float, budget: float) -> None:
        """At a joint point, with all replicas' env steps so far: when to sync next, so the last
        period ends near ``budget``. Every replica computes it from the same figures."""
        steps0, version0 = self._last
        updates = self._version - version0
        rate = (global_steps - steps0) / updates if updates > 0 else 0.0
        self.next_at = self._version + next_period(self.every, budget - global_steps, rate)
        self._last = (global_steps, self._version)

    def finish(self, env_steps: int) -> None:
        """Nothing: the run ends at a joint point, right after a sync."""

    def close(self) -> None:
        """Nothing to let go (the process group is the trainer's)."""

    def metrics(self) -> dict[str, float]:
        return {"sync/count": float(self.syncs), "sync/bytes_sent": float(self.bytes_sent)}

    def state_dict(self) -> dict[str, Any]:
        """The outer state: DiLoCo's anchor and momentum, and the sync schedule."""
        return {
            "anchor": None if self.anchor is None else self.anchor.cpu(),
            "momentum": None if self.momentum is None else self.momentum.cpu(),
            "next_at": self.next_at,
            "last": list(self._last),
            "syncs": self.syncs,
            "bytes_sent": self.bytes_sent,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not self.averaging and state.get("anchor") is not None:
            self.anchor = state["anchor"].clone()
            self.momentum = state["momentum"].clone()
        self.next_at = int(state["next_at"])
        steps, version = state["last"]
        self._last = (float(steps), int(version))
        self.syncs = int(state["syncs"])
        self.bytes_sent = int(state["bytes_sent"])


def make_loose_sync(par: ParallelConfig, ctx: DistContext, learner: object) -> ReplicaSync | None:
    """The synchronisation ``par.sync`` asks for among ``ctx``'s replicas; None for
    ``allreduce`` (the learner all-reduces every update itself) or a single process."""
    if par.sync == "allreduce" or not ctx.distributed:
        return None
    if not isinstance(learner, Reconcilable):
        raise TypeError(
            f"learner.parallel.sync: {par.sync} needs a learner with replica_state() and "
            f"load_replica_state(); {type(learner).__name__} has none"
        )
    if par.sync == "async":
        return GossipSync(learner, ctx, par.sync_every)
    if par.sync == "local_sgd":
        return PeriodicSync(learner, ctx, par.sync_every)
    return PeriodicSync(learner, ctx, par.sync_every, par.outer_learning_rate, par.outer_momentum)
