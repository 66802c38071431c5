"""``actors.mode: ray`` with ``actors.ray.local_actors``: process mode's worker processes for the
actors on the learner's machine, Ray actors everywhere else.

Ray actors are what remote nodes need, but on the learner's own machine a Ray actor costs more
than a worker process: with a 1 ms simulation on this 2-core machine, Ray actors reached
0.75–0.78 of process mode's rate (docs/BENCHMARKS.md, "Ray actors"). :class:`HybridPool` runs
both under one pool contract: up to ``local_actors`` actors as worker processes of a
:class:`~mtrl.actors.pool.ParallelPool` on this machine — acting through the central inference
server or with their own policy copies, as ``actors.inference`` says — the others as Ray actors
of a :class:`~mtrl.actors.ray_pool.RayPool` anywhere in the cluster.

Where an actor goes: a new actor (or a restart) runs locally while fewer than ``local_actors``
run here and its task is not pinned to nodes by ``placement.resources`` (the learner's machine
need not have its simulation); else on Ray. Fewer actors wanted: Ray actors stop first.

Both pools share one :class:`~mtrl.actors.faults.FaultBook` and one actor-id counter, so a
task's faults, restarts and quarantine are counted once, whichever kind of actor failed; this
pool owns the book (it starts due restarts and counts the pending ones) and, when a task is
quarantined, stops its actors in both.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter

import torch

from mtrl.actors.faults import FaultBook, FaultPolicy
from mtrl.actors.inference import InferenceModel
from mtrl.actors.occupancy import ActorOccupancy
from mtrl.actors.pool import ParallelPool, TaskSetup, actor_changes
from mtrl.actors.ray_cluster import this_node
from mtrl.actors.ray_pool import RayPool
from mtrl.actors.server import ActorEvent, ReadyUnroll
from mtrl.actors.shard_insert import ShardRoute
from mtrl.config.placement import RayConfig, TaskPlacement

#: Seconds each wait on the local pool's unrolls lasts before the Ray actors' are checked.
POLL_S = 0.002


class HybridPool:
    """Local worker processes, plus Ray actors (module docstring)."""

    mode = "ray"

    def __init__(
        self,
        tasks: list[TaskSetup | None],
        unroll_length: int,
        inference: InferenceModel,
        *,
        local_actors: int,
        placements: list[TaskPlacement] | None = None,
        ray_config: RayConfig | None = None,
        num_slots: int = 2,
        start_method: str = "spawn",
        faults: FaultPolicy | None = None,
        local_inference: bool = False,
    ) -> None:
        """``local_inference``: the worker processes act with their own policy copies
        (:class:`~mtrl.actors.pool.ParallelPool`), instead of asking the inference server."""
        self.tasks = tasks
        self.local_actors = local_actors
        self.placements = placements or [TaskPlacement() for _ in tasks]
        self.fault_policy = faults or FaultPolicy()
        self.book = FaultBook(self.fault_policy, [t.name if t else None for t in tasks])
        self.faults = self.book.faults
        ids = itertools.count()
        shared = dict(num_slots=num_slots, faults=self.fault_policy, book=self.book, ids=ids)
        # The Ray side first: it joins (or starts) the cluster, which the local side needs
        # nothing of; a failure to join then leaves no worker processes behind.
        self.remote = RayPool(
            tasks,
            unroll_length,
            inference,  # read once: a CPU copy of its model goes to the object store
            placements=self.placements,
            ray_config=ray_config,
            watch_starved=False,  # get() watches, counting the local actors as running
            **shared,
        )
        self.local = ParallelPool(
            tasks,
            unroll_length,
            inference,
            mode="process",
            start_method=start_method,
            local_inference=local_inference,
            **shared,
        )
        self._where: dict[int, ParallelPool | RayPool] = {}  # every actor started: its side
        self._quarantined: set[int] = set()
        self._room_said = False  # the first set_actors names the tasks Ray has no room for
        self._node = this_node()

    # -- actors -------------------------------------------------------------------------------
    def _pinned(self, task: int) -> bool:
        return bool(self.placements[task].resources)

    def actors_per_task(self) -> list[int]:
        """Actors per task, local and remote, counting those waiting to be restarted."""
        local, remote = self.local.actors_per_task(), self.remote.actors_per_task()
        counts = [a + b for a, b in zip(local, remote, strict=True)]
        for task in self.book.pending():
            counts[task] += 1
        return counts

    def occupancy(self) -> list[ActorOccupancy]:
        """Each running actor's slots, local and remote."""
        return self.local.occupancy() + self.remote.occupancy()

    def local_per_task(self) -> list[int]:
        """Actors per task running on this machine as worker processes."""
        return self.local.actors_per_task()

    def start_actor(self, task: int) -> int:
        """Start one more actor for ``task``: here while there is room and the task is not
        pinned to other nodes, else on Ray; returns its id."""
        here = not self._pinned(task) and sum(self.local.actors_per_task()) < self.local_actors
        pool = self.local if here else self.remote
        actor_id = pool.start_actor(task)
        self._where[actor_id] = pool
        return actor_id

    def stop_actor(self, actor_id: int) -> None:
        pool = self._where.get(actor_id)
        if pool is not None:
            pool.stop_actor(actor_id)

    def set_actors(self, counts: list[int]) -> None:
        """Start or stop actors so that task ``i`` has ``counts[i]`` of them (Ray actors stop
        before local ones; pending restarts count as actors; quarantined tasks get none)."""
        pinned = [i for i in range(len(self.tasks)) if self._pinned(i)]
        for task, start, stop in actor_changes(self.actors_per_task(), counts, self.book, pinned):
            for _ in range(start):
                self.start_actor(task)
            newest_first = self.remote.actor_ids(task)[::-1] + self.local.actor_ids(task)[::-1]
            for actor_id in newest_first[:stop]:
                self.stop_actor(actor_id)
        if not self._room_said:
            self._room_said = True
            self.remote.warn_no_room(self.local.actors_per_task())

    def no_actor_reasons(self) -> dict[int, str]:
        """Per task that wants actors and has none running here or on a node, why."""
        return self.remote.no_actor_reasons(self.local.actors_per_task())

    def budget_slots(self) -> int | None:
        """The Ray side's budget (``budget_from_cluster``) plus the local actors; else None."""
        remote = self.remote.budget_slots()
        return None if remote is None else remote + self.local_actors

    def metrics(self) -> dict[str, float]:
        """Actors per node, the local ones counted on this machine's node; ``actors/local``."""
        per_node = Counter(self.remote.actors_per_node())
        local = sum(self.local.actors_per_task())
        if local:
            per_node[self._node] += local
        out: dict[str, float] = {"actors/nodes": float(len(per_node)), "actors/local": float(local)}
        remote = self.remote.metrics()
        for name in ("actors/summaries", "actors/unroll_bytes"):
            out[name] = remote[name]
        out.update({f"actors/node/{n[:12]}": float(c) for n, c in per_node.items()})
        return out

    def set_shard_routes(self, routes: list[ShardRoute | None]) -> None:
        """The Ray actors store their unrolls in their nodes' shards; the local ones keep
        sending theirs through shared memory (the learner inserts those)."""
        self.remote.set_shard_routes(routes)

    # -- the trainer's loop -------------------------------------------------------------------
    def get(self, timeout: float = 1.0) -> list[ReadyUnroll]:
        """Unrolls that are ready from either side (waits up to ``timeout`` for the first)."""
        self._supervise()
        self.remote.check_starved(self.local.actors_per_task())
        has_local = any(self.local.actors_per_task())
        has_remote = any(self.remote.actors_per_task())
        if not has_remote:
            out = self.local.get(timeout)
        elif not has_local:
            out = self.remote.get(timeout)
        else:
            deadline = time.monotonic() + timeout
            while True:
                out = self.local.get(timeout=0.0) + self.remote.get(timeout=0.0)
                remaining = deadline - time.monotonic()
                if out or remaining <= 0:
                    break
                out = self.local.get(timeout=min(POLL_S, remaining))
                if out:
                    out += self.remote.get(timeout=0.0)
                    break
        self._stop_quarantined()
        return out

    def release(self, unroll: ReadyUnroll) -> None:
        pool = self._where.get(unroll.actor_id)
        if pool is not None:
            pool.release(unroll)

    def publish(self, model: torch.nn.Module, version: int) -> None:
        self.local.publish(model, version)
        self.remote.publish(model, version)

    def events(self) -> list[ActorEvent]:
        """Faults and quarantines of either side since the last call."""
        return self.book.pop_events()

    def _supervise(self) -> None:
        """Start the restarts that are due, each where :meth:`start_actor` puts it."""
        for task in self.book.due(time.monotonic()):
            self.start_actor(task)

    def _stop_quarantined(self) -> None:
        """A task quarantined by one side's fault: stop its actors on the other side too."""
        for task, f in enumerate(self.faults):
            if f.quarantined and task not in self._quarantined:
                self._quarantined.add(task)
                for actor_id in self.local.actor_ids(task) + self.remote.actor_ids(task):
                    self.stop_actor(actor_id)

    def close(self) -> None:
        """Stop the local workers, then the Ray actors (and an embedded Ray)."""
        try:
            self.local.close()
        finally:
            self.remote.close()
