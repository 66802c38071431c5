"""The Ray pool's side of sharded replay: which replay shards each task's actors store their
unrolls in, and what of the unrolls reached the learner.

The learner's shard group says, per task, where its Ray actors insert (a
:class:`~mtrl.actors.shard_insert.ShardRoute`; None: the unrolls come to the learner).
:class:`ShardRoutes` keeps those routes: an actor gets its task's route with its start call, and
a running actor a new one only when the route's version changed (a shard was started again), so
that it resolves its node's shards anew. :class:`UnrollTally` counts what came back: a
:class:`~mtrl.actors.shard_insert.ShardedUnroll` (a summary; its actor stored the unroll in a
shard, and it holds no slot) or the unroll's arrays, by their bytes (``actors/summaries``,
``actors/unroll_bytes``).

Pure Python; the pool makes the Ray calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mtrl.actors.shard_insert import ShardedUnroll, ShardRoute, array_bytes

__all__ = ["ShardRoutes", "UnrollTally", "holds_slot"]


def _version(route: ShardRoute | None) -> int | None:
    return None if route is None else route.version


class ShardRoutes:
    """Per task, the replay shards its actors store their unrolls in (None: the unrolls come
    to the learner), each with its version."""

    def __init__(self, num_tasks: int) -> None:
        self._routes: list[ShardRoute | None] = [None] * num_tasks

    def set(self, routes: Sequence[ShardRoute | None]) -> None:
        """The learner's routes, one per task."""
        self._routes = list(routes)

    def current(self, task: int) -> tuple[ShardRoute | None, int | None]:
        """``task``'s route and its version (None, None: no route), for a new actor."""
        route = self._routes[task]
        return route, _version(route)

    def newer(self, task: int, given: int | None) -> tuple[ShardRoute | None, int | None] | None:
        """``task``'s route and version when they are not the version ``given`` (the one an
        actor holds); None when the actor holds the current one."""
        route, version = self.current(task)
        return None if version == given else (route, version)


@dataclass
class UnrollTally:
    """What of the actors' unrolls reached the learner, for the pool's metrics."""

    summaries: int = 0
    """Unrolls their actors stored in a shard: only a summary came."""
    unroll_bytes: int = 0
    """Bytes of unroll arrays that came to this process."""

    def count(self, data: Any) -> None:
        """Count one unroll as its actor's call returned it: a summary, or its arrays."""
        if isinstance(data, ShardedUnroll):
            self.summaries += 1
        else:
            self.unroll_bytes += array_bytes(data)

    def metrics(self) -> dict[str, float]:
        """``actors/summaries`` and ``actors/unroll_bytes``."""
        return {
            "actors/summaries": float(self.summaries),
            "actors/unroll_bytes": float(self.unroll_bytes),
        }


def holds_slot(buffer: Any) -> bool:
    """Whether an unroll the learner holds keeps one of its actor's slots: a summary does not
    (the learner holds no data of it; the replay's rate limiter holds such actors back)."""
    return not isinstance(buffer, ShardedUnroll)
