"""What an actor pool is to the trainer: the :class:`ActorPool` protocol, and the parts only
some pools have — actors per task that the scheduler can change (:class:`ScalablePool`), turns
in one thread in proportion to its data shares (:class:`TurnTakingPool`) and a budget that
follows a cluster's nodes (:class:`ClusterPool`).

Every pool (:class:`~mtrl.actors.serial_pool.SerialPool`,
:class:`~mtrl.actors.pool.ParallelPool`, :class:`~mtrl.actors.ray_pool.RayPool`,
:class:`~mtrl.actors.hybrid_pool.HybridPool`) serves one loop::

    for ready in pool.get(timeout):      # unrolls actors finished
        ...                              # the learner trains on them
        pool.release(ready)              # their slots go back to the actors
    pool.publish(model, version)         # actors act with the new weights
    pool.events(), pool.faults           # failures since the last call; per-task records
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch

if TYPE_CHECKING:
    from mtrl.actors.faults import TaskFaults
    from mtrl.actors.occupancy import ActorOccupancy
    from mtrl.actors.pool import TaskSetup
    from mtrl.actors.server import ActorEvent, ReadyUnroll
    from mtrl.actors.shard_insert import ShardRoute


@runtime_checkable
class ActorPool(Protocol):
    """Who steps the envs (see the module docstring)."""

    tasks: Sequence[TaskSetup | None]
    """Per task, what its actors need; None for a task this pool does not run."""
    faults: Sequence[TaskFaults]
    """Per task, its fault counters, quarantine flag and last error."""

    def get(self, timeout: float = 1.0) -> list[ReadyUnroll]:
        """Unrolls that are ready (waits up to ``timeout`` for the first one)."""
        ...

    def release(self, unroll: ReadyUnroll) -> None:
        """The learner is done with ``unroll``: its slot goes back to its actor."""
        ...

    def publish(self, model: torch.nn.Module, version: int) -> None:
        """Actors act with ``model``'s weights (policy ``version``) from their next step."""
        ...

    def events(self) -> list[ActorEvent]:
        """Faults and quarantines since the last call."""
        ...

    def actors_per_task(self) -> list[int]:
        """Actors per task, counting those waiting to be restarted."""
        ...

    def occupancy(self) -> list[ActorOccupancy]:
        """Each running actor's unroll slots (:mod:`mtrl.actors.occupancy`)."""
        ...

    def close(self) -> None:
        """Stop every actor and free what the pool holds."""
        ...


@runtime_checkable
class ScalablePool(ActorPool, Protocol):
    """A pool whose actors per task the scheduler can change."""

    def set_actors(self, counts: list[int]) -> None:
        """Start or stop actors so that task ``i`` has ``counts[i]`` (quarantined: none)."""
        ...


@runtime_checkable
class TurnTakingPool(ActorPool, Protocol):
    """A pool that meets the scheduler's data shares by turns in one thread (the serial pool),
    having no actors to move."""

    def set_data_shares(self, shares: list[float | None]) -> None:
        """Step task ``i`` in proportion to ``shares[i]`` of the samples (None: no target)."""
        ...


@runtime_checkable
class ClusterPool(ScalablePool, Protocol):
    """A pool on a cluster whose nodes come and go (Ray)."""

    def budget_slots(self) -> int | None:
        """Actors the cluster has room for now; None when the budget is the config's."""
        ...

    def metrics(self) -> dict[str, float]:
        """Cluster figures for the metric records (actors per node)."""
        ...

    def no_actor_reasons(self) -> dict[int, str]:
        """Per task that wants actors and has none running now, why (the cluster has no room
        for it): the final table's reason for a task that made no steps."""
        ...


@runtime_checkable
class ShardFedPool(ActorPool, Protocol):
    """A pool whose actors can store their unrolls in replay shards on their own nodes (Ray),
    handing the learner a :class:`~mtrl.actors.shard_insert.ShardedUnroll` instead."""

    def set_shard_routes(self, routes: list[ShardRoute | None]) -> None:
        """Per task, the shards its actors store unrolls in (None: they send them here)."""
        ...
