"""The central inference server: one forward per task for every actor waiting on it.

A thread of the learner process. It waits on all actors' pipes at once; each round it collects
the ``ACT`` requests that arrived, groups them by task, runs ONE batched forward per task over
the observations the actors wrote into shared memory, writes actions, log-probs and the weights
version back into the same slots and answers ``GO``. Finished unrolls and actor faults go to
``outbox`` for the trainer. Nothing here pickles an array.

With a recurrent model the server also keeps every actor's env copies' core states between
steps (:class:`~mtrl.actors.core_states.CoreStates`, keyed by actor id) and writes them into
each unroll's ``core_state`` at its first step.
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np

from mtrl.actors import protocol as P
from mtrl.actors.core_states import CoreStates
from mtrl.actors.inference import InferenceModel
from mtrl.actors.shard_insert import ShardedUnroll
from mtrl.actors.shm import Arena
from mtrl.actors.unroll import UnrollBuffer
from mtrl.actors.worker import ActorSpec


@dataclass
class ActorHandle:
    """The server's and pool's view of one running actor."""

    spec: ActorSpec
    conn: Connection
    arena: Arena
    slots: list[UnrollBuffer]
    worker: Any  # multiprocessing.Process or threading.Thread
    started: float = field(default_factory=time.monotonic)
    ready: bool = False
    alive: bool = True
    stopping: bool = False
    stepping_since: float | None = None  # monotonic time of the last GO, None while waiting
    last_unroll: float | None = None  # monotonic time of its last finished unroll
    stop_sent: float | None = None  # monotonic time it was asked to stop
    handled: bool = False  # the pool has dealt with its failure (kept until then)
    outstanding: set[int] = field(default_factory=set)  # slots the learner holds
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    beat: np.ndarray | None = None  # a local-inference actor's step start (worker.BEAT)

    def step_started(self) -> float | None:
        """Monotonic time the actor's current env step started; None while it is not stepping
        (waiting for actions, a free slot, or its first unroll)."""
        if self.beat is None:
            return self.stepping_since
        t = float(self.beat[0])
        return None if math.isnan(t) else t

    def send(self, msg: bytes) -> bool:
        with self.send_lock:
            try:
                self.conn.send_bytes(msg)
                return True
            except OSError:
                return False


@dataclass
class ReadyUnroll:
    """A full unroll slot handed to the learner; give it back with the pool's ``release``."""

    actor_id: int
    task: int
    buffer: UnrollBuffer | ShardedUnroll
    """The unroll's arrays, or — stored by its Ray actor in a replay shard — its summary."""
    info: P.UnrollInfo


#: Kinds of actor faults: the env raised, returned NaN/inf, the actor process died (kill -9,
#: segfault, exit), an env step outlived ``step_timeout_s``, or (Ray actors) the actor's node
#: left the cluster — the one kind that says nothing about the task's env.
FAULT_KINDS = ("raise", "nan", "exit", "hang", "lost")
#: The kinds an env can cause (a task with any of them is not evaluated at the end).
ENV_FAULT_KINDS = ("raise", "nan", "exit", "hang")


@dataclass
class ActorEvent:
    """Something the trainer should hear about.

    ``kind`` is one of :data:`FAULT_KINDS` (an actor ended without being asked to; ``text``
    says why), ``quarantine`` (task ``task`` is taken out of the run; ``actor_id`` is -1) or
    ``server`` (the inference server failed). ``lost_s``: actor seconds the fault cost (the
    unroll it was filling, plus the restart back-off), for the scheduler's statistics.
    """

    actor_id: int
    task: int
    kind: str
    text: str
    lost_s: float = 0.0


class InferenceServer:
    """Serves actions to actors over pipes + shared memory; runs in its own thread."""

    def __init__(self, model: InferenceModel, outbox: queue.Queue) -> None:
        self.model = model
        self.outbox = outbox
        self.states = CoreStates(model)  # recurrent models: per actor, per env copy
        self._actors: dict[int, ActorHandle] = {}
        self._lock = threading.Lock()
        self._lost_lock = threading.Lock()
        self._wake_r, self._wake_w = Pipe(duplex=False)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mtrl-inference", daemon=True)
        self.forwards = 0
        self.requests = 0
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def add(self, handle: ActorHandle) -> None:
        with self._lock:
            self._actors[handle.spec.actor_id] = handle
        self._wake()

    def remove(self, actor_id: int) -> None:
        with self._lock:
            self._actors.pop(actor_id, None)
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send_bytes(b"w")

    def stop(self) -> None:
        self._stop.set()
        self._wake()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._wake_r.close()
        self._wake_w.close()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._round()
        except BaseException as e:  # surfaced to the trainer by the pool
            self.error = e
            self.outbox.put(ActorEvent(-1, -1, "server", repr(e)))

    def _round(self) -> None:
        with self._lock:
            handles = {h.conn: h for h in self._actors.values() if h.alive}
        if len(self.states) > len(handles):  # actors gone: their core states go too
            self.states.retain(h.spec.actor_id for h in handles.values())
        try:
            ready = wait([*handles, self._wake_r], timeout=0.2)
        except (OSError, ValueError):
            return  # the pool closed a lost actor's pipe after the snapshot; look again
        requests: dict[int, list[tuple[ActorHandle, int, int]]] = defaultdict(list)
        for conn in ready:
            if conn is self._wake_r:
                while self._wake_r.poll():
                    self._wake_r.recv_bytes()
                continue
            h = handles[conn]
            try:
                msg = conn.recv_bytes()
            except (EOFError, OSError):
                self.mark_lost(h, "exit", "the actor exited unexpectedly")
                continue
            kind = msg[:1]
            if kind == P.ACT:
                slot, t = P.parse_act(msg)
                h.stepping_since = None
                requests[h.spec.task].append((h, slot, t))
            elif kind == P.UNROLL:
                info = P.parse_payload(msg)
                assert isinstance(info, P.UnrollInfo)
                h.stepping_since = None  # waiting for a free slot is not a hung step
                h.last_unroll = time.monotonic()
                h.outstanding.add(info.slot)
                self.outbox.put(ReadyUnroll(h.spec.actor_id, h.spec.task, h.slots[info.slot], info))
            elif kind == P.READY:
                h.ready = True
            elif kind == P.FAULT:
                self.mark_lost(h, *P.parse_fault(msg))
        for task, reqs in requests.items():
            self._serve(task, reqs)

    def mark_lost(self, h: ActorHandle, kind: str, text: str) -> None:
        """Take ``h`` out of service and report why (unless it was asked to stop)."""
        with self._lost_lock:  # the server thread (EOF, FAULT) and the pool (hang) both call
            if not h.alive:
                return
            h.alive = False
        if not h.stopping:
            self.outbox.put(ActorEvent(h.spec.actor_id, h.spec.task, kind, text))

    def _serve(self, task: int, reqs: list[tuple[ActorHandle, int, int]]) -> None:
        rows = [(h.spec.actor_id, h.slots[s], t) for h, s, t in reqs]
        raw, logp, version = self.states.act(task, rows)
        self.forwards += 1
        self.requests += len(reqs)
        start = 0
        now = time.monotonic()
        for h, s, t in reqs:
            buf = h.slots[s]
            n = buf.num_envs
            buf.actions[t] = raw[start : start + n]
            buf.behaviour_logp[t] = logp[start : start + n]
            buf.versions[t] = version
            start += n
            h.stepping_since = now
            h.send(P.GO)
