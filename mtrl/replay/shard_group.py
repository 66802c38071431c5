"""The shard actors of one learner (``replay.shards``): where each starts, its restart after a
loss, and which shard serves each node's actors (:meth:`ShardGroup.route`).

``layout: mixed``: ``count`` shards each holding a part of every task; ``per_task``: ``count``
shards per task. Shard ``i`` goes on the ``i mod hosts``-th node with CPUs and what
``replay.shards`` asks (:mod:`mtrl.replay.shard_math`), held there by node affinity; one that
cannot start there within :data:`PLACE_TIMEOUT_S` starts wherever Ray puts it. Each task's
front in the learner is :class:`~mtrl.replay.sharded.ShardedTaskReplay`.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from mtrl.actors.ray_cluster import import_ray, live_nodes_by_id, lost_actor_errors
from mtrl.actors.shard_insert import ShardRoute
from mtrl.config.replay import ReplayConfig, ShardsConfig
from mtrl.errors import UserError
from mtrl.replay.shard import ReplayShard, ShardStats
from mtrl.replay.shard_math import (
    host_of,
    shard_hosts,
)
from mtrl.replay.storage import SequenceStorage, TransitionStorage

__all__ = ["PLACE_TIMEOUT_S", "Key", "ShardGroup"]

PLACE_TIMEOUT_S = 60.0
"""How long a shard may take to start on its node before it is started wherever Ray puts it."""

KILL_TIMEOUT_S = 60.0
"""How long :meth:`ShardGroup.kill` waits for a killed shard to stop answering."""

Key = tuple[int | None, int]
"""A shard: (its task with ``layout: per_task``, None with ``mixed``; its number)."""


class ShardGroup:
    """The shard actors of one learner's replays, started on first use, restarted when lost.

    Shard ``i`` (of each task) is placed on the ``i mod hosts``-th host
    (:func:`~mtrl.replay.shard_math.shard_hosts`: the nodes with CPUs that offer what a shard
    asks), so the actors there can write to it; :meth:`route` tells a task's actors which of
    its shards serves their node."""

    def __init__(self, replay: ReplayConfig) -> None:
        assert replay.shards is not None
        self.replay = replay
        self.cfg: ShardsConfig = replay.shards
        self.ray = import_ray()
        self.lost_errors = lost_actor_errors(self.ray)
        self._remote = self.ray.remote(ReplayShard)
        self.handles: dict[Key, Any] = {}
        self.generation: dict[Key, int] = {}
        self.instance: dict[Key, str] = {}
        self.node_of: dict[Key, str] = {}
        self._hosts: list[str] | None = None
        self._opened: dict[Key, list[tuple[int, Any, int, int]]] = {}
        self.lost_shards = 0
        self.lost_items = 0

    def keys(self, task: int) -> list[Key]:
        """The shards holding task ``task``."""
        owner = task if self.cfg.layout == "per_task" else None
        return [(owner, i) for i in range(self.cfg.count)]

    @property
    def hosts(self) -> list[str]:
        """The nodes shards go to (asked of the cluster once)."""
        if self._hosts is None:
            self._hosts = shard_hosts(live_nodes_by_id(), self.cfg.num_cpus, self.cfg.resources)
        return self._hosts

    def _target(self, key: Key) -> str | None:
        """The node shard ``key`` goes to: its host, or — started again after a loss — the
        live host with the fewest shards (None: let Ray spread it)."""
        if key not in self.generation:
            return host_of(key[1], self.hosts)
        live = shard_hosts(live_nodes_by_id(), self.cfg.num_cpus, self.cfg.resources)
        others = [n for k, n in self.node_of.items() if k != key]
        return min(live, key=lambda n: (others.count(n), n)) if live else None

    def _start(self, key: Key) -> Any:
        """Start shard ``key`` on its target node (held there: Ray's soft affinity let a shard
        asking for no CPUs land on any node), or — no target, or the target cannot take it
        within :data:`PLACE_TIMEOUT_S` (full, or just lost) — wherever Ray spreads it."""
        node = self._target(key)
        handle = self._launch(node)
        try:
            where = self.ray.get(handle.where.remote(), timeout=PLACE_TIMEOUT_S)
        except Exception:
            if node is None:
                raise
            with contextlib.suppress(Exception):
                self.ray.kill(handle, no_restart=True)
            handle = self._launch(None)
            where = self.ray.get(handle.where.remote())
        self.handles[key] = handle
        self.generation[key] = self.generation.get(key, -1) + 1
        self.node_of[key] = where[0]
        return handle

    def _launch(self, node: str | None) -> Any:
        """A new shard actor held to ``node`` (None: spread by Ray)."""
        strategy: Any = "SPREAD"
        if node is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            strategy = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
        return self._remote.options(
            num_cpus=self.cfg.num_cpus,
            resources=dict(self.cfg.resources),
            scheduling_strategy=strategy,
            max_restarts=0,
        ).remote(self.replay)

    def handle(self, key: Key) -> Any:
        return self.handles[key] if key in self.handles else self._start(key)

    def open(
        self, task: int, template: TransitionStorage | SequenceStorage, segments: int
    ) -> list[ShardStats]:
        """Give task ``task`` ``segments`` segments in each of its shards; their stats."""
        refs = []
        peers = len(self.keys(task))
        for key in self.keys(task):
            self._opened.setdefault(key, []).append((task, template, segments, peers))
            refs.append(self.handle(key).open.remote(task, template, segments, peers))
        stats = list(self.ray.get(refs))
        for key, st in zip(self.keys(task), stats, strict=True):
            self.instance[key] = st.instance
        return stats

    def replace(self, key: Key, generation: int, why: str) -> None:
        """Shard ``key`` (as of ``generation``) is lost: count it and start it again, empty,
        with every task it held (once, however many fronts saw it fail)."""
        if self.generation[key] != generation:
            return  # already replaced
        self.lost_shards += 1
        where = f"replay shard {key[1]}" + (f" of task {key[0]}" if key[0] is not None else "")
        if not self.cfg.restart_lost:
            raise UserError(
                f"{where} was lost ({why}) and replay.shards.restart_lost is false: stopping"
            )
        print(f"WARNING: {where} was lost ({why}); starting it again, empty", flush=True)
        with contextlib.suppress(Exception):  # already gone with its node
            self.ray.kill(self.handles[key], no_restart=True)
        handle = self._start(key)
        opened = self._opened.get(key, [])
        stats = self.ray.get([handle.open.remote(*args) for args in opened])
        if stats:
            self.instance[key] = stats[0].instance

    def route(self, task: int) -> ShardRoute:
        """Where task ``task``'s actors store their unrolls: its shards by node, each with its
        number among the task's shards; the version changes when one is started again."""
        by_node: dict[str, list[tuple[int, Any]]] = {}
        for i, key in enumerate(self.keys(task)):
            self.handle(key)
            by_node.setdefault(self.node_of[key], []).append((i, self.handles[key]))
        limit = self.cfg.rate_limit
        wait_s = limit.max_wait_s if limit is not None and limit.waits == "actors" else None
        version = sum(self.generation[k] for k in self.keys(task))
        return ShardRoute(by_node, wait_s, version)

    def where(self) -> dict[str, str]:
        """Each started shard's Ray node id (for tests and the run's log)."""
        nodes = self.ray.get([h.where.remote() for h in self.handles.values()])
        return {f"{k[0]}/{k[1]}": n for k, (n, _) in zip(self.handles, nodes, strict=True)}

    def sources(self) -> dict[str, dict[int, dict[str, int]]]:
        """Each started shard's inserts per task and sender (:meth:`ReplayShard.sources`)."""
        got = self.ray.get([h.sources.remote() for h in self.handles.values()])
        return {f"{k[0]}/{k[1]}": s for k, s in zip(self.handles, got, strict=True)}

    def kill(self, key: Key) -> None:
        """End shard ``key``'s actor as a lost node would (for fault drills and tests).

        ``ray.kill`` only asks for the end; this returns once a call to the actor fails, so
        that every call sent after it meets a dead shard, as after a node's loss."""
        handle = self.handles[key]
        self.ray.kill(handle, no_restart=True)
        lost = lost_actor_errors(self.ray)
        until = time.monotonic() + KILL_TIMEOUT_S
        while time.monotonic() < until:
            try:
                self.ray.get(handle.where.remote())
            except lost:
                return
            time.sleep(0.01)
        raise RuntimeError(f"shard {key} still answers {KILL_TIMEOUT_S:.0f} s after ray.kill")
