"""Actors that insert into their own node's replay shard (``replay.shards`` with Ray actors).

With sharded replay, a Ray actor of a rule that draws only from its replay (SAC) does not send
its unroll to the learner: it adds it to a shard on its own node (the arrays go through that
node's object store, never across the network) and returns a :class:`ShardedUnroll`, the few
numbers the trainer and the learner read of an unroll (task, size, policy version, the shard's
acknowledgement, the observations' moments for ``learner.sac.normalize_obs``).

:class:`ShardRoute` is what the learner's shard group tells a task's actors: its shards by
node. An actor resolves its node's shards once (:class:`ShardWriter`) and writes to them in
turn; with ``rate_limit.waits: actors`` it first waits, at most ``wait_s``, while its shard is
ahead of the samples-per-insert ratio, and counts the wait. A shard that is lost mid-insert is
dropped from the writer and the unroll travels to the learner as before (which inserts it).

Pure Python and numpy; Ray is imported where a call needs it (inside a Ray worker).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mtrl.actors.ray_cluster import lost_actor_errors
from mtrl.actors.unroll import UnrollBuffer

__all__ = [
    "ObsMoments",
    "ShardRoute",
    "ShardWriter",
    "ShardedUnroll",
    "array_bytes",
    "obs_moments",
]

ObsMoments = tuple[float, np.ndarray, np.ndarray]
"""(rows, mean, population variance) of an unroll's flattened observations, float64."""

FIRST_POLL_S = 0.002
"""An actor waiting on its shard asks again after this, doubling up to :data:`LAST_POLL_S`."""
LAST_POLL_S = 0.05


@dataclass(frozen=True)
class ShardRoute:
    """Where one task's actors insert: per Ray node id, the task's shards there as (the
    shard's number among the task's shards, its actor handle); how long an actor waits on a
    shard ahead of its ratio (None: never); and a version that changes when a shard is
    started again (actors then resolve their shards anew)."""

    shards: dict[str, list[tuple[int, Any]]]
    wait_s: float | None = None
    version: int = 0


@dataclass
class ShardedUnroll:
    """An unroll stored by its actor in a shard: what the trainer and the learner read of it
    instead of its arrays (the names are :class:`~mtrl.learner.batch.TaskBatch`'s)."""

    task: int
    length: int
    num_envs: int
    policy_version: int
    num_samples: int
    """Steps that enter a loss (reset steps excluded)."""
    shard: int
    """The shard's number among the task's shards."""
    ack: Any
    """The shard's answer to the insert (its stats for the task after it)."""
    node: str
    """The Ray node of the actor (and of the shard)."""
    obs_moments: ObsMoments | None = None
    insert_wait_s: float = 0.0
    """Seconds the actor waited on its shard before inserting (``waits: actors``)."""
    overrun: bool = False
    """The wait reached its bound and the unroll went in anyway."""
    loss_weight: float = 1.0

    @property
    def num_steps(self) -> int:
        """Env steps the unroll holds, ``T x N``."""
        return self.length * self.num_envs


def obs_moments(obs: Any) -> ObsMoments | None:
    """The moments of an unroll's observations ``[T + 1, N, *obs]`` over rows ``0..T-1``
    (row ``T`` is the next unroll's row 0), each observation flattened; None for dict or
    non-float observations (the learner normalises float vectors only)."""
    if not isinstance(obs, np.ndarray) or not np.issubdtype(obs.dtype, np.floating):
        return None
    rows = np.asarray(obs[:-1], np.float64).reshape((obs.shape[0] - 1) * obs.shape[1], -1)
    return float(len(rows)), rows.mean(0), rows.var(0)


def array_bytes(data: Any) -> int:
    """Bytes of the arrays in ``data`` (an array, or a nested dict of them; None: 0): what an
    unroll that came as data weighs."""
    if isinstance(data, dict):
        return sum(array_bytes(v) for v in data.values())
    return int(data.nbytes) if isinstance(data, np.ndarray) else 0


@dataclass
class ShardWriter:
    """One actor's side of actor-side inserts: its node's shards, written in turn."""

    route: ShardRoute
    node: str
    mine: list[tuple[int, Any]] = field(init=False)
    turn: int = 0

    def __post_init__(self) -> None:
        self.mine = list(self.route.shards.get(self.node, []))

    def insert(self, buf: UnrollBuffer) -> ShardedUnroll | None:
        """Store ``buf`` in the next of this node's shards and say what the learner needs;
        None when this node has no shard of the task (left): the caller sends the data."""
        import ray  # inside a Ray worker

        lost = lost_actor_errors(ray)
        while self.mine:
            index, handle = self.mine[self.turn % len(self.mine)]
            self.turn += 1
            try:
                waited, overrun = self._wait(handle, buf)
                ack = ray.get(handle.add.remote(buf, self.node))
            except lost:
                self.mine.remove((index, handle))
                continue
            return ShardedUnroll(
                task=buf.task,
                length=buf.length,
                num_envs=buf.num_envs,
                policy_version=buf.policy_version,
                num_samples=int(np.count_nonzero(buf.valid)),
                shard=index,
                ack=ack,
                node=self.node,
                obs_moments=obs_moments(buf.obs),
                insert_wait_s=waited,
                overrun=overrun,
            )
        return None

    def _wait(self, handle: Any, buf: UnrollBuffer) -> tuple[float, bool]:
        """Wait while the shard says an insert of ``buf`` would run ahead of its ratio, at
        most ``route.wait_s``: (seconds waited, whether the bound was reached)."""
        import ray

        limit = self.route.wait_s
        if limit is None:
            return 0.0, False
        began, pause = time.monotonic(), FIRST_POLL_S
        while not ray.get(handle.admits.remote(buf.task, buf.length * buf.num_envs)):
            waited = time.monotonic() - began
            if waited >= limit:
                return waited, True
            time.sleep(min(pause, limit - waited))
            pause = min(pause * 2, LAST_POLL_S)
        return time.monotonic() - began, False
