"""Actor-side inserts into sharded replay, as the trainer wires them: the learner says where
each task's Ray actors store their unrolls, the pool tells the actors, and what reaches the
learner is a :class:`~mtrl.actors.shard_insert.ShardedUnroll` (a summary) where it used to be
the unroll's arrays.

A learner takes part by having ``shard_routes()`` and ``set_wait_hook()``
(:class:`ShardFedLearner`: SAC, which draws only from its replay); a pool by having
``set_shard_routes`` (:class:`~mtrl.actors.pool_protocol.ShardFedPool`: the Ray pools). Either
missing, nothing changes: the unrolls come to the learner, which inserts them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from mtrl.actors.pool_protocol import ShardFedPool
from mtrl.actors.server import ReadyUnroll
from mtrl.actors.shard_insert import ShardedUnroll, ShardRoute
from mtrl.learner.batch import TaskBatch, task_batch

__all__ = ["ShardFedLearner", "ShardFeed", "learner_inputs"]


@runtime_checkable
class ShardFedLearner(Protocol):
    """A learner whose Ray actors may store their unrolls in its replay shards."""

    def shard_routes(self) -> list[ShardRoute | None] | None:
        """Per task, where its actors store unrolls; None: the unrolls come to the learner."""
        ...

    def set_wait_hook(self, hook: Callable[[], None] | None) -> None:
        """Call ``hook`` while a draw waits for the actors' inserts."""
        ...


class ShardFeed:
    """Keeps the pool's shard routes the learner's: set before the first actor starts, and
    again whenever a shard was started again (a route's version changed)."""

    def __init__(
        self, learner: Any, pool: Any, while_waiting: Callable[[], None] | None = None
    ) -> None:
        """``while_waiting``: what the trainer does while the learner waits for the actors'
        inserts (takes their finished unrolls in, so they go on: their calls come from the
        trainer's loop)."""
        self.learner = learner if isinstance(learner, ShardFedLearner) else None
        self.pool = pool if isinstance(pool, ShardFedPool) else None
        self._versions: list[int | None] | None = None
        self.refresh()
        if self.active and self.learner is not None:
            self.learner.set_wait_hook(while_waiting)

    @property
    def active(self) -> bool:
        """Whether the actors store their unrolls in shards."""
        return self._versions is not None

    def refresh(self) -> None:
        """Hand the pool the learner's routes when they changed."""
        if self.learner is None or self.pool is None:
            return
        routes = self.learner.shard_routes()
        if routes is None:
            return
        versions = [None if r is None else r.version for r in routes]
        if versions != self._versions:
            self.pool.set_shard_routes(routes)
            self._versions = versions


def learner_inputs(
    pending: Sequence[ReadyUnroll], device: torch.device
) -> list[TaskBatch | ShardedUnroll]:
    """What the learner's update takes of each ready unroll: its arrays as a batch on
    ``device``, or the summary of one its actor stored in a shard."""
    return [
        ru.buffer if isinstance(ru.buffer, ShardedUnroll) else task_batch(ru.buffer, device)
        for ru in pending
    ]
