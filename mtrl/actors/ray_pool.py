"""``actors.mode: ray``: actor workers as Ray actors, anywhere in a Ray cluster.

Same contract as the other pools (:mod:`mtrl.actors.pool`: ``get / release / publish / events /
set_actors``), so the trainer, the scheduler and the share gate do not change. What differs:

* **Placement.** Each actor reserves its task's :class:`~mtrl.config.placement.TaskPlacement`
  (CPUs, memory, custom resources that pin it to the nodes where its simulation is installed);
  Ray puts it on a node that has them. A task the cluster has no room for is warned of
  (:mod:`mtrl.actors.ray_room`).
* **Inference on the actor** (IMPALA's arrangement, :mod:`mtrl.actors.ray_actor`): each actor
  acts with its own CPU copy of the policy. :meth:`RayPool.publish` only notes the learner's
  newest version; the weights go into Ray's object store (once per version, when an actor is
  next asked for an unroll) and actors load them at unroll boundaries. Every step carries the
  version that acted.
* **Unrolls through the object store**, one Ray call per unroll. An actor has at most
  ``num_slots`` unrolls in flight or held by the learner (backpressure, as the shared-memory
  slots of the other pools: a gated task's actors wait). Unroll arrays come back as
  read-only views — of the object store, zero-copy, for an unroll above Ray's inline limit
  (~100 KiB: a 16-env MinAtar unroll's 134 KB observations) from this node; smaller ones
  arrive inline with the reply — and the learner only reads them.
* **Or into a replay shard on the actor's node** (sharded replay, :meth:`RayPool.set_shard_routes`):
  the actor stores the unroll there and the call returns a
  :class:`~mtrl.actors.shard_insert.ShardedUnroll` in the buffer's place, which holds no slot
  (the learner keeps no data of it; the replay's rate limiter is what holds such actors back).
  The pool counts what reached the learner (``actors/summaries``, ``actors/unroll_bytes``); the
  routes and the counts: :mod:`mtrl.actors.ray_shard_routes`.
* **Faults** (as :class:`~mtrl.actors.pool.ParallelPool`, docs/FAULTS.md): an env that raises
  or returns NaN arrives as the call's exception; a killed actor process or a lost node as
  Ray's actor-died error; a call running ``step_timeout_s`` past the actor's usual unroll time
  is a hang and the actor is killed (a lost node, where the actor's node no longer answers).
  Each is counted per task and kind, the unroll is dropped, and a new actor is started after
  the back-off — on any node that has the resources, so a lost node's actors come back
  elsewhere. The learner never waits on a dead node: it only
  ever takes calls that have finished.
"""

from __future__ import annotations

import copy
import itertools
import time
import warnings
from collections import Counter, defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from mtrl.actors.faults import FaultBook, FaultPolicy
from mtrl.actors.inference import InferenceModel
from mtrl.actors.occupancy import ActorOccupancy
from mtrl.actors.pool import TaskSetup, actor_changes
from mtrl.actors.ray_actor import RemoteActor, RemoteActorSpec, weights_of
from mtrl.actors.ray_cluster import (
    actor_options,
    alive_nodes,
    cluster_cpus,
    connect,
    import_ray,
    live_nodes,
    node_answers,
)
from mtrl.actors.ray_faults import describe_ray_error, overdue_unroll
from mtrl.actors.ray_placement import missing_resources, unfit_placements
from mtrl.actors.ray_room import RoomWarnings
from mtrl.actors.ray_shard_routes import ShardRoutes, UnrollTally, holds_slot
from mtrl.actors.server import ActorEvent, ReadyUnroll
from mtrl.actors.shard_insert import ShardedUnroll, ShardRoute
from mtrl.actors.unroll import UnrollBuffer
from mtrl.config.placement import RayConfig, TaskPlacement
from mtrl.errors import UserError

# The learner reads unroll arrays in place; Ray hands them over as read-only views of its
# object store, which torch.as_tensor warns about once. Nothing writes to a batch.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")


#: How long newly started actors of pinned tasks (custom resources) may take to get their nodes
#: before unconstrained actors started with them are created (which could take the room there).
PINNED_FIRST_S = 60.0

NODE_LEFT = "the actor's node left the cluster (lost, or removed)"


@dataclass
class _Actor:
    """The pool's view of one remote actor."""

    spec: RemoteActorSpec
    handle: Any  # ray.actor.ActorHandle
    start_ref: Any  # the pending start() call; None once started
    node_ref: Any  # the pending node() call: done once Ray has given the actor a node
    started: float = field(default_factory=time.monotonic)
    node: str | None = None
    inflight: deque = field(default_factory=deque)  # (ref, submitted at), oldest first
    held: int = 0  # unrolls the learner holds
    last_done: float | None = None  # when its last call was seen finished
    walls: deque = field(default_factory=lambda: deque(maxlen=20))  # recent unroll wall s
    placed: bool = False  # Ray gave it a node (it may still be building its env)
    waiting_said: bool = False
    placement_checked: float = float("-inf")  # when its placement was last checked
    route: int | None = None  # the version of the shard route it was given


class RayPool:
    """Remote actors on a Ray cluster feeding the learner through the object store."""

    mode = "ray"

    def __init__(
        self,
        tasks: list[TaskSetup | None],
        unroll_length: int,
        inference: InferenceModel,
        *,
        placements: list[TaskPlacement] | None = None,
        ray_config: RayConfig | None = None,
        num_slots: int = 2,
        faults: FaultPolicy | None = None,
        book: FaultBook | None = None,
        ids: Iterator[int] | None = None,
        watch_starved: bool = True,
    ) -> None:
        """``book`` and ``ids``: shared with another pool, as
        :class:`~mtrl.actors.pool.ParallelPool`'s (the book's owner restarts actors).
        ``watch_starved``: the first :meth:`set_actors` names the tasks the cluster has no
        room for, and :meth:`get` warns of tasks left without a running actor (False: the
        owner calls :meth:`warn_no_room` and :meth:`check_starved` with its own actors
        counted).

        Raises :class:`UserError` (and leaves the cluster) when no live node could host one
        actor of some task: such a run would train without that task."""
        self.tasks = tasks
        self.unroll_length = unroll_length
        self.num_slots = num_slots
        self.greedy = inference.greedy
        self.placements = placements or [TaskPlacement() for _ in tasks]
        self.fault_policy = faults or FaultPolicy()
        self.owns_book = book is None
        self.book = book or FaultBook(self.fault_policy, [t.name if t else None for t in tasks])
        self.faults = self.book.faults
        self.ray_config = ray_config or RayConfig()
        self.session = connect(self.ray_config)
        self._ray = import_ray()
        self._refuse_unfit_placements()
        self.watch_starved = watch_starved
        names = [t.name if t is not None else None for t in tasks]
        self.room = RoomWarnings(names, self.placements, self.ray_config.starved_warning_s)
        self._remote = self._ray.remote(RemoteActor)
        model = copy.deepcopy(inference.model).to("cpu").eval()
        model.requires_grad_(False)
        self._model_ref = self._ray.put(model)
        self._version = inference.version
        self._learner_model: torch.nn.Module | None = None
        self._weights: tuple[int, Any] | None = None  # (version, object ref) last put
        self._actors: dict[int, _Actor] = {}
        self._ids = ids or itertools.count()
        self._started_per_task: dict[int, int] = defaultdict(int)
        self._routes = ShardRoutes(len(tasks))
        self.tally = UnrollTally()  # what of the unrolls came here: summaries, array bytes

    def _refuse_unfit_placements(self) -> None:
        names = [t.name if t is not None else None for t in self.tasks]
        where = f"the Ray cluster at {self.session.address}"
        problems = unfit_placements(self.placements, names, live_nodes(), where)
        if problems:
            self.session.close()
            raise UserError("\n".join(problems), problems=problems)

    # -- actors -------------------------------------------------------------------------------
    def actor_ids(self, task: int) -> list[int]:
        """Ids of ``task``'s live actors, oldest first."""
        return sorted(i for i, a in self._actors.items() if a.spec.task == task)

    def actors_per_task(self) -> list[int]:
        """Live actors per task, counting those waiting to be restarted (when this pool owns
        its fault book)."""
        counts = [0] * len(self.tasks)
        for a in self._actors.values():
            counts[a.spec.task] += 1
        for task in self.book.pending() if self.owns_book else []:
            counts[task] += 1
        return counts

    def occupancy(self) -> list[ActorOccupancy]:
        """Each live actor's slots (:mod:`mtrl.actors.occupancy`); one waiting for a node
        has not started."""
        return [
            ActorOccupancy(
                i, a.spec.task, a.start_ref is None, a.held, self.num_slots, a.spec.num_envs
            )
            for i, a in self._actors.items()
        ]

    def actors_per_node(self) -> dict[str, int]:
        """Started actors per Ray node id (actors still waiting for a node are not counted)."""
        return dict(Counter(a.node for a in self._actors.values() if a.node is not None))

    def metrics(self) -> dict[str, float]:
        """``actors/nodes`` and ``actors/node/<id>`` (the first 12 hex digits of the node id);
        ``actors/summaries`` (unrolls their actors stored in a shard) and
        ``actors/unroll_bytes`` (unroll arrays that reached this process)."""
        per_node = self.actors_per_node()
        out: dict[str, float] = {"actors/nodes": float(len(per_node)), **self.tally.metrics()}
        out.update({f"actors/node/{n[:12]}": float(c) for n, c in per_node.items()})
        return out

    def budget_slots(self) -> int | None:
        """With ``budget_from_cluster``: actors the cluster has CPUs for now, (CPUs -
        ``reserve_cpus``) / the mean CPUs per actor of this pool's tasks; else None."""
        if not self.ray_config.budget_from_cluster:
            return None
        mine = [self.placements[i].num_cpus for i, t in enumerate(self.tasks) if t is not None]
        per_actor = sum(mine) / max(len(mine), 1)
        return int((cluster_cpus() - self.ray_config.reserve_cpus) // per_actor)

    def start_actor(self, task: int) -> int:
        """Create one more remote actor for ``task``; returns its id."""
        t = self.tasks[task]
        assert t is not None
        k = self._started_per_task[task]
        self._started_per_task[task] += 1
        actor_id = next(self._ids)
        spec = RemoteActorSpec(
            **t.job_fields(actor_id, k, self.unroll_length),
            greedy=self.greedy,
            torch_threads=max(1, int(self.placements[task].num_cpus)),
        )
        opts = actor_options(self.placements[task])
        handle = self._remote.options(name=None, **opts).remote(spec, self._model_ref)
        node_ref = handle.node.remote()  # runs as soon as Ray has placed the actor
        route, version = self._routes.current(task)
        a = _Actor(spec, handle, handle.start.remote(route), node_ref, route=version)
        self._actors[actor_id] = a
        return actor_id

    def set_shard_routes(self, routes: list[ShardRoute | None]) -> None:
        """Per task, the replay shards its actors store their unrolls in (None: the unrolls
        come here); actors started from now on get theirs at start, running ones when the
        route's version changed (a shard was started again)."""
        self._routes.set(routes)
        for a in self._actors.values():
            newer = self._routes.newer(a.spec.task, a.route)
            if newer is not None:
                a.handle.set_route.remote(newer[0])  # runs before its next unroll
                a.route = newer[1]

    def stop_actor(self, actor_id: int) -> None:
        """End an actor now; unrolls it already handed out stay valid (the driver owns them)."""
        a = self._actors.pop(actor_id, None)
        if a is not None:
            self._ray.kill(a.handle, no_restart=True)

    def set_actors(self, counts: list[int]) -> None:
        """Start or stop actors so that task ``i`` has ``counts[i]`` of them (pending restarts
        count as actors; quarantined tasks get none)."""
        # Tasks pinned by custom resources first: their nodes fill with their own actors
        # before the unconstrained ones (which can go anywhere) take the room. Ray places
        # actors asynchronously, so the unconstrained wait until the pinned just started have
        # their nodes (up to PINNED_FIRST_S): on a busy machine Ray otherwise placed an
        # unconstrained actor on a pinned task's node first, and that task's last actor found
        # no room anywhere for the rest of the run.
        pinned = [i for i, p in enumerate(self.placements) if p.resources]
        started_pinned: list[int] = []
        for task, start, stop in actor_changes(self.actors_per_task(), counts, self.book, pinned):
            if start and task not in pinned and started_pinned:
                self._await_placed(started_pinned, PINNED_FIRST_S)
                started_pinned = []
            for _ in range(start):
                actor_id = self.start_actor(task)
                if task in pinned:
                    started_pinned.append(actor_id)
            for actor_id in self.actor_ids(task)[::-1][:stop]:
                self.stop_actor(actor_id)
        if self.watch_starved and not self.room.said_at_start:
            self.warn_no_room()

    def warn_no_room(self, local: list[int] | None = None) -> None:
        """Once, when the run's first actors have been created: one WARNING per task that gets
        no actor because the actors ask for more than the cluster has
        (:meth:`RoomWarnings.at_start`). ``local``: the owner's actors per task running
        outside Ray (a task with one is not left out)."""
        order = [a.spec.task for a in self._actors.values()]  # in the order created
        self.room.at_start(order, self.actors_per_task(), local)

    def no_actor_reasons(self, local: list[int] | None = None) -> dict[int, str]:
        """Per task that wants actors and has none on a node now, why, in a few words (for
        the final table: :meth:`RoomWarnings.reasons`). ``local``: as :meth:`warn_no_room`'s."""
        return self.room.reasons(self.actors_per_task(), self.placed_per_task(), local)

    def _await_placed(self, actor_ids: list[int], timeout_s: float) -> None:
        """Wait until Ray has given each of ``actor_ids`` a node, or ``timeout_s``."""
        refs = [self._actors[i].node_ref for i in actor_ids if i in self._actors]
        if refs:
            self._ray.wait(refs, num_returns=len(refs), timeout=timeout_s)

    # -- the trainer's loop -------------------------------------------------------------------
    def get(self, timeout: float = 1.0) -> list[ReadyUnroll]:
        """Unrolls that are ready (waits up to ``timeout`` for the first one)."""
        self._supervise()
        if self.watch_starved:
            self.check_starved()
        pending = {}
        for a in self._actors.values():
            if a.start_ref is not None:
                pending[a.start_ref] = a
            for ref, _ in a.inflight:
                pending[ref] = a
        if not pending:
            if timeout > 0:
                time.sleep(min(timeout, 0.05))
            return []
        refs = list(pending)
        ready, _ = self._ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:
            ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=0)
        out: list[ReadyUnroll] = []
        done = set(ready)
        for ref in refs:  # in submission order per actor
            if ref not in done:
                continue
            a = pending[ref]
            if self._actors.get(a.spec.actor_id) is not a:
                continue  # failed or stopped earlier in this round
            try:
                if ref is a.start_ref:
                    a.node = self._ray.get(ref)
                    a.start_ref = None
                    self._submit(a)
                else:
                    out.append(self._take(a, ref))
            except Exception as e:
                self._failed(a, e)
        return out

    def _take(self, a: _Actor, ref: Any) -> ReadyUnroll:
        data, info = self._ray.get(ref)
        head, _ = a.inflight.popleft()
        assert head is ref, "an actor's calls finish in order"
        now = time.monotonic()
        a.last_done = now
        a.walls.append(info.wall_seconds)
        self.faults[a.spec.task].record_unroll(now)
        buf: UnrollBuffer | ShardedUnroll
        if holds_slot(data):
            a.held += 1
            buf = UnrollBuffer(task=a.spec.task, **data)
        else:
            buf = data  # stored in its shard: the slot is free now
        self.tally.count(data)
        self._submit(a)
        return ReadyUnroll(a.spec.actor_id, a.spec.task, buf, info)

    def _submit(self, a: _Actor) -> None:
        """Ask ``a`` for unrolls until it has ``num_slots`` in flight or held."""
        while a.start_ref is None and len(a.inflight) + a.held < self.num_slots:
            ref = a.handle.unroll.remote(*self._newest_weights())
            a.inflight.append((ref, time.monotonic()))

    def _newest_weights(self) -> tuple[Any, int]:
        """(object ref of the newest weights, their version), put once per version."""
        if self._learner_model is None:
            return None, self._version
        if self._weights is None or self._weights[0] != self._version:
            self._weights = (self._version, self._ray.put(weights_of(self._learner_model)))
        return self._weights[1], self._version

    def release(self, unroll: ReadyUnroll) -> None:
        a = self._actors.get(unroll.actor_id)
        if a is None or not holds_slot(unroll.buffer):
            return  # a summary held no slot
        a.held = max(a.held - 1, 0)
        self._submit(a)

    def publish(self, model: torch.nn.Module, version: int) -> None:
        """Note the learner's newest weights; they are copied out when an actor next asks."""
        self._learner_model, self._version = model, version

    def events(self) -> list[ActorEvent]:
        """Faults and quarantines seen since the last call (for logging and the scheduler)."""
        return self.book.pop_events()

    # -- faults -------------------------------------------------------------------------------
    def _failed(self, a: _Actor, exc: BaseException) -> None:
        kind, text = describe_ray_error(exc)
        if kind == "exit" and self._node_left(a):
            kind, text = "lost", NODE_LEFT
        self._lost(a, kind, text)

    @staticmethod
    def _node_left(a: _Actor) -> bool:
        """Whether the cluster no longer counts ``a``'s node among its live ones."""
        return a.node is not None and a.node not in alive_nodes()

    @staticmethod
    def _node_silent(a: _Actor, answered: dict[str, bool]) -> bool:
        """Whether ``a``'s node is gone or no longer answers (asked when an unroll is overdue:
        a node killed outright stalls its actors' calls before the cluster marks it dead).
        ``answered`` keeps each node's answer for one pass over the actors, so a lost node's
        many overdue actors cost one probe (up to its connection timeout), not one each."""
        if a.node is None:
            return False
        if a.node not in answered:
            answered[a.node] = node_answers(a.node)
        return not answered[a.node]

    def _lost(self, a: _Actor, kind: str, text: str) -> None:
        """Count a fault of ``a``'s task, drop the actor and schedule its replacement."""
        now, task = time.monotonic(), a.spec.task
        self._actors.pop(a.spec.actor_id, None)
        self._ray.kill(a.handle, no_restart=True)
        where = f" on node {a.node[:12]}" if a.node else ""
        text = f"{text} (actor {a.spec.actor_id}{where})"
        if self.book.failed(task, a.spec.actor_id, kind, text, a.last_done or a.started, now):
            for actor_id in [i for i, o in self._actors.items() if o.spec.task == task]:
                self.stop_actor(actor_id)  # quarantined

    def _supervise(self) -> None:
        """Restart due actors; kill actors whose unroll runs far past their usual time."""
        now = time.monotonic()
        for task in self.book.due(now) if self.owns_book else []:
            self.start_actor(task)
        fp = self.fault_policy
        answered: dict[str, bool] = {}
        for a in list(self._actors.values()):
            if a.start_ref is not None:
                self._check_start(a, now)
                continue
            if not a.inflight:
                continue
            # Calls run one after another: the oldest began when the previous one finished.
            began = max(a.inflight[0][1], a.last_done or 0.0)
            text = overdue_unroll(now - began, a.walls, fp.step_timeout_s)
            if text is None:
                continue
            if self._node_silent(a, answered):  # a lost node, not a hung env step
                self._lost(a, "lost", NODE_LEFT)
            else:
                self._lost(a, "hang", text)

    def _check_start(self, a: _Actor, now: float) -> None:
        """An actor not started in ``start_timeout_s``: a fault when no node can ever host it
        (its placement names resources no live node has), else it waits for room."""
        waited = now - a.started
        if waited <= self.fault_policy.start_timeout_s or now - a.placement_checked < 10.0:
            return
        a.placement_checked = now  # asks the cluster's state: at most every 10 s per actor
        missing = missing_resources(self.placements[a.spec.task], live_nodes())
        if missing:
            self._lost(
                a,
                "hang",
                f"not started after {waited:.0f}s: no live node has {', '.join(missing)} "
                f"(tasks[{a.spec.task}].placement)",
            )
        elif not a.waiting_said:
            a.waiting_said = True
            print(
                f"WARNING: actor {a.spec.actor_id} of task {a.spec.task_name!r} is waiting for "
                f"room in the Ray cluster after {waited:.0f}s (all nodes that fit its placement "
                "are full)"
            )

    # -- tasks without actors -----------------------------------------------------------------
    def placed_per_task(self) -> list[int]:
        """Actors per task that Ray has given a node (started, or building their env)."""
        waiting = {a.node_ref: a for a in self._actors.values() if not a.placed}
        if waiting:
            ready, _ = self._ray.wait(list(waiting), num_returns=len(waiting), timeout=0)
            for ref in ready:
                waiting[ref].placed = True
        counts = [0] * len(self.tasks)
        for a in self._actors.values():
            counts[a.spec.task] += a.placed or a.start_ref is None
        return counts

    def check_starved(self, local: list[int] | None = None) -> None:
        """Warn once (per episode) of each task that has wanted actors and had none placed
        for ``actors.ray.starved_warning_s``, saying why (:meth:`RoomWarnings.check_starved`).
        ``local``: the owner's actors per task running outside Ray (they count as running).
        At most once a second: it asks Ray for the actors' state."""
        now = time.monotonic()
        if self.room.due(now):
            self.room.check_starved(now, self.actors_per_task(), self.placed_per_task(), local)

    def close(self) -> None:
        """Kill every actor and leave the cluster (stopping an embedded Ray)."""
        for actor_id in list(self._actors):
            self.stop_actor(actor_id)
        self.book.restart_at = []
        self.session.close()
