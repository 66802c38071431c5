"""Actor pools: who steps the envs. One interface, three modes.

* :class:`SerialPool` steps every task in the caller's thread (debugging, tests, and often the
  fastest choice on one or two cores).
* :class:`ParallelPool` runs actor workers as processes (``process``) or as threads of this
  process (``thread``, for envs that release the GIL such as envpool), with the central
  :class:`~mtrl.actors.server.InferenceServer` and unroll slots in shared memory.

The trainer's loop is the same for all: ``get()`` ready unrolls, learn from them,
``release()`` them, ``publish()`` the new weights. Actors that fail are restarted with
exponential back-off; a task whose actors keep failing is quarantined (see
:class:`FaultPolicy`), and the run goes on with the others.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import torch

from mtrl.actors import protocol as P
from mtrl.actors.inference import InferenceModel
from mtrl.actors.runner import SerialActor
from mtrl.actors.server import ActorEvent, ActorHandle, InferenceServer, ReadyUnroll
from mtrl.actors.shm import Arena
from mtrl.actors.unroll import UnrollBuffer, obs_row, unroll_fields
from mtrl.actors.worker import ActorSpec, actor_main, slot_arrays
from mtrl.plugins import BatchEnv


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


@dataclass(frozen=True)
class FaultPolicy:
    """Restart with back-off ``base · 2^k`` (capped); quarantine after ``max_restarts``."""

    max_restarts: int = 5
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    step_timeout_s: float = 60.0
    start_timeout_s: float = 300.0


@dataclass
class TaskFaults:
    """Per-task fault counters, reported in metrics."""

    faults: int = 0
    restarts: int = 0
    quarantined: bool = False
    last_error: str = ""


class SerialPool:
    """Every task's env stepped in this thread, one unroll per task per :meth:`get`."""

    mode = "serial"

    def __init__(
        self,
        tasks: list[TaskSetup],
        envs: list[BatchEnv],
        unroll_length: int,
        inference: InferenceModel,
    ) -> None:
        self.tasks = tasks
        self.inference = inference
        self.actors = [
            SerialActor(t.index, env, unroll_length, t.reward_scale, t.name)
            for t, env in zip(tasks, envs, strict=True)
        ]
        self.faults = [TaskFaults() for _ in tasks]
        self._owner: dict[int, SerialActor] = {}

    def actors_per_task(self) -> list[int]:
        return [1] * len(self.tasks)

    def _act(self, buf: UnrollBuffer, t: int) -> None:
        raw, logp, version = self.inference.act(buf.task, obs_row(buf.obs, t))
        buf.actions[t] = raw
        buf.behaviour_logp[t] = logp
        buf.versions[t] = version

    def get(self, timeout: float = 1.0) -> list[ReadyUnroll]:
        out = []
        for a in self.actors:
            s = a.stepper
            env_s0, t0 = s.env_seconds, time.perf_counter()
            buf = a.collect(self._act)
            returns, lengths = s.episodes.drain()
            info = P.UnrollInfo(
                slot=-1,
                env_steps=buf.length * buf.num_envs,
                episode_returns=returns,
                episode_lengths=lengths,
                env_seconds=s.env_seconds - env_s0,
                wall_seconds=time.perf_counter() - t0,
            )
            self._owner[id(buf)] = a
            out.append(ReadyUnroll(a.task, a.task, buf, info))
        return out

    def release(self, unroll: ReadyUnroll) -> None:
        self._owner.pop(id(unroll.buffer)).release(unroll.buffer)

    def publish(self, model: torch.nn.Module, version: int) -> None:
        self.inference.publish(model, version)

    def events(self) -> list[ActorEvent]:
        return []

    def close(self) -> None:
        for a in self.actors:
            a.close()


class ParallelPool:
    """Actor workers (processes or threads) fed by a central inference server."""

    def __init__(
        self,
        tasks: list[TaskSetup],
        unroll_length: int,
        inference: InferenceModel,
        *,
        mode: str = "process",
        num_slots: int = 2,
        start_method: str = "spawn",
        faults: FaultPolicy | None = None,
    ) -> None:
        if mode not in ("process", "thread"):
            raise ValueError(f"unknown actor mode {mode!r}")
        self.mode = mode
        self.tasks = tasks
        self.unroll_length = unroll_length
        self.num_slots = num_slots
        self.inference = inference
        self.fault_policy = faults or FaultPolicy()
        self.faults = [TaskFaults() for _ in tasks]
        self._ctx = mp.get_context(start_method)
        self._outbox: queue.Queue = queue.Queue()
        self.server = InferenceServer(inference, self._outbox)
        self._handles: dict[int, ActorHandle] = {}
        self._next_id = 0
        self._started_per_task: dict[int, int] = defaultdict(int)
        self._restart_at: list[tuple[float, int]] = []  # (monotonic time, task)
        self._events: list[ActorEvent] = []
        self.server.start()

    # -- actors -------------------------------------------------------------------------------
    def actors_per_task(self) -> list[int]:
        counts = [0] * len(self.tasks)
        for h in self._handles.values():
            if h.alive and not h.stopping:
                counts[h.spec.task] += 1
        return counts

    def start_actor(self, task: int) -> int:
        """Start one more actor for ``task``; returns its id."""
        t = self.tasks[task]
        k = self._started_per_task[task]
        self._started_per_task[task] += 1
        fields = unroll_fields(self.unroll_length, t.num_envs, t.observation_space, t.action_space)
        arena = Arena.create(
            {f"s{i}:{name}": f for i in range(self.num_slots) for name, f in fields.items()},
            prefix=f"mtrl-{task}-",
        )
        actor_id = self._next_id
        self._next_id += 1
        spec = ActorSpec(
            actor_id=actor_id,
            task=task,
            task_name=t.name,
            env_id=t.env_id,
            num_envs=t.num_envs,
            seed=t.seed + k * t.num_envs,
            unroll_length=self.unroll_length,
            reward_scale=t.reward_scale,
            layout=arena.layout,
            num_slots=self.num_slots,
            env_kwargs=dict(t.env_kwargs),
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
        handle = ActorHandle(spec, parent, arena, slots, worker)
        worker.start()
        if self.mode == "process":
            child.close()  # the child holds its own copy; EOF reaches us when it dies
        self._handles[actor_id] = handle
        self.server.add(handle)
        return actor_id

    def stop_actor(self, actor_id: int) -> None:
        """Ask an actor to stop; its finished unrolls already handed out stay valid."""
        h = self._handles.get(actor_id)
        if h is None or h.stopping:
            return
        h.stopping = True
        h.send(P.STOP)

    def set_actors(self, counts: list[int]) -> None:
        """Start or stop actors so that task ``i`` has ``counts[i]`` of them."""
        current = self.actors_per_task()
        for task, (have, want) in enumerate(zip(current, counts, strict=True)):
            if self.faults[task].quarantined:
                want = 0
            for _ in range(want - have):
                self.start_actor(task)
            if want < have:
                mine = [
                    h.spec.actor_id
                    for h in self._handles.values()
                    if h.spec.task == task and h.alive and not h.stopping
                ]
                for actor_id in sorted(mine, reverse=True)[: have - want]:
                    self.stop_actor(actor_id)

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
        self.inference.publish(model, version)

    def events(self) -> list[ActorEvent]:
        """Faults seen since the last call (for logging)."""
        out, self._events = self._events, []
        return out

    # -- faults -------------------------------------------------------------------------------
    def _on_event(self, ev: ActorEvent) -> None:
        if ev.kind == "server":
            raise RuntimeError(f"the inference server failed: {ev.text}") from self.server.error
        self._events.append(ev)
        f = self.faults[ev.task]
        f.faults += 1
        f.last_error = ev.text
        h = self._handles.get(ev.actor_id)
        if h is not None:
            self._kill(h)
        if f.faults > self.fault_policy.max_restarts:
            if not f.quarantined:
                f.quarantined = True
                for other in list(self._handles.values()):
                    if other.spec.task == ev.task:
                        self.stop_actor(other.spec.actor_id)
            return
        fp = self.fault_policy
        delay = min(fp.backoff_base_s * 2 ** (f.faults - 1), fp.backoff_max_s)
        self._restart_at.append((time.monotonic() + delay, ev.task))

    def _supervise(self) -> None:
        """Restart due actors; kill actors stuck in one env step past the timeout."""
        now = time.monotonic()
        due = [task for at, task in self._restart_at if at <= now]
        self._restart_at = [(at, task) for at, task in self._restart_at if at > now]
        for task in due:
            if not self.faults[task].quarantined:
                self.faults[task].restarts += 1
                self.start_actor(task)
        fp = self.fault_policy
        for h in list(self._handles.values()):
            if not h.alive or h.stopping:
                self._reap(h)
                continue
            if h.stepping_since is not None and now - h.stepping_since > fp.step_timeout_s:
                text = f"an env step took longer than step_timeout_s={fp.step_timeout_s:g}"
                self.server.mark_lost(h, "hang", text)
            elif not h.ready and now - h.started > fp.start_timeout_s:
                self.server.mark_lost(h, "hang", f"did not start within {fp.start_timeout_s:g}s")

    def _kill(self, h: ActorHandle) -> None:
        h.alive = False
        self.server.remove(h.spec.actor_id)
        w = h.worker
        if isinstance(w, threading.Thread):
            return  # a thread cannot be killed; it exits on its own or with the process
        if w.is_alive():
            w.kill()
        w.join(timeout=5)

    def _reap(self, h: ActorHandle) -> None:
        """Forget an actor that is gone once the learner has given back all its slots."""
        if h.alive and not h.stopping:
            return
        w = h.worker
        if w.is_alive():
            if not h.stopping:
                return
            w.join(timeout=0)
            if w.is_alive():
                return
        self.server.remove(h.spec.actor_id)
        if not h.outstanding:
            h.conn.close()
            h.arena.close()
            self._handles.pop(h.spec.actor_id, None)

    def close(self) -> None:
        for h in list(self._handles.values()):
            h.stopping = True
            h.send(P.STOP)
        deadline = time.monotonic() + 10
        for h in list(self._handles.values()):
            h.worker.join(timeout=max(deadline - time.monotonic(), 0.1))
            if isinstance(h.worker, mp.process.BaseProcess) and h.worker.is_alive():
                h.worker.kill()
                h.worker.join(timeout=5)
        self.server.stop()
        for h in list(self._handles.values()):
            h.conn.close()
            h.arena.close()
        self._handles.clear()
