"""Actor pools: who steps the envs. One interface, three modes.

* :class:`~mtrl.actors.serial_pool.SerialPool` steps every task in the caller's thread
  (debugging, tests, and often the fastest choice on one or two cores).
* :class:`ParallelPool` runs actor workers as processes (``process``) or as threads of this
  process (``thread``, for envs that release the GIL such as envpool), with the central
  :class:`~mtrl.actors.server.InferenceServer` and unroll slots in shared memory.

The trainer's loop is the same for all: ``get()`` ready unrolls, learn from them,
``release()`` them, ``publish()`` the new weights.

Faults (parallel pools; docs/FAULTS.md): an env that raises or returns NaN/inf, an actor process
that dies (kill -9, segfault) and an env step that outlives ``step_timeout_s`` are each detected,
counted per task and kind (:class:`~mtrl.actors.faults.TaskFaults`), reported through
:meth:`ParallelPool.events`, and the actor is restarted with exponential back-off; the unroll
it was filling is dropped, so bad data never reaches the learner. A task whose actors fail more
than they deliver is quarantined (see :class:`FaultPolicy`) and the run goes on with the others.
The serial pool is for debugging: an env error there propagates with its traceback.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import multiprocessing as mp
import queue
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from mtrl.actors import protocol as P
from mtrl.actors.faults import FaultBook, FaultPolicy, describe_exit
from mtrl.actors.inference import InferenceModel
from mtrl.actors.occupancy import ActorOccupancy
from mtrl.actors.server import ActorEvent, ActorHandle, InferenceServer, ReadyUnroll
from mtrl.actors.shared_weights import SharedWeights
from mtrl.actors.shm import Arena
from mtrl.actors.unroll import UnrollBuffer, unroll_fields
from mtrl.actors.worker import BEAT, ActorSpec, actor_main, slot_arrays


@dataclass(frozen=True)
class TaskSetup:
    """What a pool needs to know about one task to run actors for it."""

    index: int
    name: str
    env_id: str
    num_envs: int
    seed: int
    reward_scale: float
    observation_space: gym.Space
    action_space: gym.Space
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def job_fields(self, actor_id: int, k: int, unroll_length: int) -> dict[str, Any]:
        """The :class:`~mtrl.actors.worker.ActorJob` fields of this task's ``k``-th actor
        (its envs seeded ``seed + k * num_envs``, so no two actors share a seed)."""
        return dict(
            actor_id=actor_id,
            task=self.index,
            task_name=self.name,
            env_id=self.env_id,
            num_envs=self.num_envs,
            seed=self.seed + k * self.num_envs,
            unroll_length=unroll_length,
            reward_scale=self.reward_scale,
            env_kwargs=dict(self.env_kwargs),
        )


def actor_changes(
    current: list[int], counts: list[int], book: FaultBook, first: list[int] | None = None
) -> list[tuple[int, int, int]]:
    """``(task, actors to start, actors to stop)`` that take ``current`` to ``counts``:
    quarantined tasks and tasks the pool does not run (no name) want none, and a pending
    restart is cancelled before a running actor is stopped. ``first``: tasks to handle first."""
    order = (first or []) + [i for i in range(len(counts)) if i not in (first or [])]
    out = []
    for task in order:
        have, want = current[task], counts[task]
        if book.faults[task].quarantined or book.names[task] is None:
            want = 0
        excess = have - want
        while excess > 0 and book.cancel_restart(task):
            excess -= 1
        out.append((task, max(want - have, 0), max(excess, 0)))
    return out


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Block SIGINT in this thread while starting a worker: the child inherits the mask, so a
    Ctrl-C during its start-up stays pending until it has chosen to ignore SIGINT."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class ParallelPool:
    """Actor workers (processes or threads) fed by a central inference server.

    Thread-mode actors cannot be killed: a hung one is abandoned (no longer served, its pipe
    closed so it exits when its step returns) and replaced; it leaks a thread until then
    (:meth:`abandoned_threads`), and an env that crashes the interpreter takes the learner with
    it. Use process mode for envs that may hang or crash.
    """

    def __init__(
        self,
        tasks: list[TaskSetup | None],
        unroll_length: int,
        inference: InferenceModel,
        *,
        mode: str = "process",
        num_slots: int = 2,
        start_method: str = "spawn",
        faults: FaultPolicy | None = None,
        book: FaultBook | None = None,
        ids: Iterator[int] | None = None,
        local_inference: bool = False,
    ) -> None:
        """``book`` and ``ids``: a fault book and actor-id counter shared with another pool
        (:class:`~mtrl.actors.hybrid_pool.HybridPool`); the book's owner then starts the due
        restarts and counts the pending ones, not this pool. ``local_inference``: every actor
        acts with its own CPU copy of the policy, its weights published through shared memory
        (:mod:`mtrl.actors.shared_weights`), instead of asking the inference server."""
        if mode not in ("process", "thread"):
            raise ValueError(f"unknown actor mode {mode!r}")
        self.shared_weights: SharedWeights | None = None
        self._policy: torch.nn.Module | None = None
        if local_inference:
            self._policy = copy.deepcopy(inference.model).cpu()
            self.shared_weights = SharedWeights(inference.model)
        self.mode = mode
        self.tasks = tasks
        self.unroll_length = unroll_length
        self.num_slots = num_slots
        self.inference = inference
        self.fault_policy = faults or FaultPolicy()
        self.owns_book = book is None
        self.book = book or FaultBook(self.fault_policy, [t.name if t else None for t in tasks])
        self.faults = self.book.faults
        self._ids = ids or itertools.count()
        self._ctx = mp.get_context(start_method)
        if start_method == "forkserver":
            # Starts and restarts fork from a server that has imported the worker and loaded
            # the plugins once, instead of paying a fresh interpreter's imports each time.
            self._ctx.set_forkserver_preload(["mtrl.actors.preload"])
        self._outbox: queue.Queue = queue.Queue()
        self.server = InferenceServer(inference, self._outbox)
        self._handles: dict[int, ActorHandle] = {}
        self._started_per_task: dict[int, int] = defaultdict(int)
        self._abandoned: list[threading.Thread] = []
        self.server.start()

    # -- actors -------------------------------------------------------------------------------
    def actor_ids(self, task: int) -> list[int]:
        """Ids of ``task``'s running actors (not stopping), oldest first."""
        mine = (i for i, h in self._handles.items() if h.spec.task == task)
        return sorted(i for i in mine if self._handles[i].alive and not self._handles[i].stopping)

    def actors_per_task(self) -> list[int]:
        """Running actors per task, counting those waiting to be restarted (when this pool
        owns its fault book)."""
        counts = [0] * len(self.tasks)
        for h in self._handles.values():
            if h.alive and not h.stopping:
                counts[h.spec.task] += 1
        for task in self.book.pending() if self.owns_book else []:
            counts[task] += 1
        return counts

    def occupancy(self) -> list[ActorOccupancy]:
        """Each running actor's slots (:mod:`mtrl.actors.occupancy`)."""
        return [
            ActorOccupancy(
                i, h.spec.task, h.ready, len(h.outstanding), self.num_slots, h.spec.num_envs
            )
            for i, h in self._handles.items()
            if h.alive and not h.stopping
        ]

    def start_actor(self, task: int) -> int:
        """Start one more actor for ``task``; returns its id."""
        t = self.tasks[task]
        k = self._started_per_task[task]
        self._started_per_task[task] += 1
        fields = unroll_fields(
            self.unroll_length,
            t.num_envs,
            t.observation_space,
            t.action_space,
            self.inference.state_size,
        )
        arena_fields = {
            f"s{i}:{name}": f for i in range(self.num_slots) for name, f in fields.items()
        }
        weights = self.shared_weights
        if weights is not None:
            arena_fields[BEAT] = ((1,), np.dtype(np.float64))
        arena = Arena.create(arena_fields, prefix=f"mtrl-{task}-")
        actor_id = next(self._ids)
        spec = ActorSpec(
            **t.job_fields(actor_id, k, self.unroll_length),
            layout=arena.layout,
            num_slots=self.num_slots,
            policy=self._policy,
            weights=None if weights is None else weights.layout,
            greedy=self.inference.greedy,
        )
        parent, child = mp.Pipe(duplex=True)
        if self.mode == "process":
            worker: Any = self._ctx.Process(
                target=actor_main, args=(spec, child), name=f"mtrl-actor-{actor_id}", daemon=True
            )
        else:
            worker = threading.Thread(
                target=actor_main, args=(spec, child), name=f"mtrl-actor-{actor_id}", daemon=True
            )
        slots = [
            UnrollBuffer.from_arrays(task, slot_arrays(arena.arrays, i))
            for i in range(self.num_slots)
        ]
        beat = arena.arrays.get(BEAT)
        if beat is not None:
            beat[0] = np.nan
        handle = ActorHandle(spec, parent, arena, slots, worker, beat=beat)
        if self.mode == "process":
            with _sigint_blocked():
                worker.start()
            child.close()  # the child holds its own copy; EOF reaches us when it dies
        else:
            worker.start()
        self._handles[actor_id] = handle
        self.server.add(handle)
        return actor_id

    def stop_actor(self, actor_id: int) -> None:
        """Ask an actor to stop; its finished unrolls already handed out stay valid."""
        h = self._handles.get(actor_id)
        if h is None or h.stopping:
            return
        h.stopping = True
        h.stop_sent = time.monotonic()
        h.send(P.STOP)

    def set_actors(self, counts: list[int]) -> None:
        """Start or stop actors so that task ``i`` has ``counts[i]`` of them (pending restarts
        count as actors; quarantined tasks get none)."""
        for task, start, stop in actor_changes(self.actors_per_task(), counts, self.book):
            for _ in range(start):
                self.start_actor(task)
            for actor_id in self.actor_ids(task)[::-1][:stop]:
                self.stop_actor(actor_id)

    def abandoned_threads(self) -> int:
        """Hung thread-mode actors that were given up on and have not returned yet."""
        self._abandoned = [t for t in self._abandoned if t.is_alive()]
        return len(self._abandoned)

    # -- the trainer's loop -------------------------------------------------------------------
    def get(self, timeout: float = 1.0) -> list[ReadyUnroll]:
        """Unrolls that are ready (waits up to ``timeout`` for the first one)."""
        self._supervise()
        out: list[ReadyUnroll] = []
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                item = (
                    self._outbox.get(timeout=max(remaining, 0.0))
                    if not out
                    else self._outbox.get_nowait()
                )
            except queue.Empty:
                break
            if isinstance(item, ActorEvent):
                self._on_event(item)
            else:
                self.faults[item.task].record_unroll(time.monotonic())
                out.append(item)
            if remaining <= 0 and not out:
                break
        return out

    def release(self, unroll: ReadyUnroll) -> None:
        h = self._handles.get(unroll.actor_id)
        if h is None:
            return
        h.outstanding.discard(unroll.info.slot)
        if h.alive:
            h.send(P.release(unroll.info.slot))
        self._reap(h)

    def publish(self, model: torch.nn.Module, version: int) -> None:
        if self.shared_weights is None:
            self.inference.publish(model, version)
        else:  # no actor asks the server: only the actors' copies need the weights
            self.shared_weights.publish(model, version)
            self.inference.version = version

    def events(self) -> list[ActorEvent]:
        """Faults and quarantines seen since the last call (for logging and the scheduler)."""
        return self.book.pop_events()

    # -- faults -------------------------------------------------------------------------------
    def _on_event(self, ev: ActorEvent) -> None:
        if ev.kind == "server":
            raise RuntimeError(f"the inference server failed: {ev.text}") from self.server.error
        now = time.monotonic()
        h = self._handles.get(ev.actor_id)
        text = ev.text
        if h is not None:
            h.handled = True
            # A hung actor is killed at once; one that failed is exiting: give it a moment so
            # its exit code is its own.
            code = self._kill(h, grace=0.0 if ev.kind == "hang" else 2.0)
            if ev.kind == "exit" and self.mode == "process":
                text = describe_exit(code)
            elif ev.kind == "hang":
                text += (
                    "; thread-mode actors cannot be killed: the thread is abandoned and leaks "
                    "until its step returns (use process mode for envs that may hang)"
                    if self.mode == "thread"
                    else "; the actor process was killed"
                )
        since = (h.last_unroll or h.started) if h is not None else now
        if self.book.failed(ev.task, ev.actor_id, ev.kind, text, since, now):
            for other in list(self._handles.values()):  # quarantined: stop its actors
                if other.spec.task == ev.task:
                    self.stop_actor(other.spec.actor_id)

    def _supervise(self) -> None:
        """Restart due actors; kill actors stuck in one env step past the timeout."""
        now = time.monotonic()
        for task in self.book.due(now) if self.owns_book else []:
            self.start_actor(task)
        fp = self.fault_policy
        for h in list(self._handles.values()):
            if h.alive and h.stopping and now - (h.stop_sent or now) > fp.stop_timeout_s:
                self._kill(h, grace=0.0)  # asked to stop long ago: stuck in its env
            if not h.alive or h.stopping:
                self._reap(h)
                continue
            stepping = h.step_started()
            if stepping is not None and now - stepping > fp.step_timeout_s:
                text = f"an env step took longer than step_timeout_s={fp.step_timeout_s:g}"
                self.server.mark_lost(h, "hang", text)
            elif not h.ready and now - h.started > fp.start_timeout_s:
                text = f"building and resetting the env took longer than {fp.start_timeout_s:g}s"
                self.server.mark_lost(h, "hang", text)

    def _kill(self, h: ActorHandle, grace: float) -> int | None:
        """Take ``h`` out of service and end its process (after ``grace`` seconds to exit on
        its own); returns the exit code. A live thread is abandoned instead."""
        h.alive = False
        self.server.remove(h.spec.actor_id)
        w = h.worker
        if isinstance(w, threading.Thread):
            if w.is_alive():
                self._abandoned.append(w)
            return None
        if grace > 0:
            w.join(timeout=grace)
        if w.is_alive():
            w.kill()
        w.join(timeout=5)
        return w.exitcode

    def _reap(self, h: ActorHandle) -> None:
        """Forget an actor that is gone once the learner has given back all its slots."""
        if h.alive and not h.stopping:
            return
        if h.alive and h.worker.is_alive():
            return  # asked to stop and still winding down
        if not h.stopping and not h.handled:
            return  # failed: its event, still queued, needs the handle
        # Gone, killed, or an abandoned thread: closing our end of its pipe makes the latter
        # exit as soon as its env step returns.
        self.server.remove(h.spec.actor_id)
        if not h.outstanding:
            h.conn.close()
            h.arena.close()
            self._handles.pop(h.spec.actor_id, None)

    def close(self) -> None:
        """Stop every actor (kill processes that do not stop within ``stop_timeout_s``)."""
        live = [h for h in self._handles.values() if h.alive]
        for h in live:
            h.stopping = True
            h.send(P.STOP)
        deadline = time.monotonic() + self.fault_policy.stop_timeout_s
        for h in live:
            h.worker.join(timeout=max(deadline - time.monotonic(), 0.1))
        for h in self._handles.values():
            w = h.worker
            if isinstance(w, mp.process.BaseProcess) and w.is_alive():
                w.kill()
                w.join(timeout=5)
        self.server.stop()
        for h in list(self._handles.values()):
            h.conn.close()
            h.arena.close()
        self._handles.clear()
        if self.shared_weights is not None:
            self.shared_weights.close()
