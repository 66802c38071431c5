"""An actor worker: one batch env of one task, stepped with actions from the inference server
or from its own copy of the policy.

Runs in its own process (spawned) or in a thread of the learner process (for envs that release
the GIL, such as envpool). It builds its env from the plugin registry (a spawned process
rebuilds the registry from entry points) and maps its unroll slots from shared memory. With
central inference it sends ``ACT(slot, t)`` for every step and waits for ``GO`` — the server has
then written the actions into the slot. With local inference (``actors.inference: local``) it
acts with its own CPU copy of the policy, loading the learner's newer weights from shared memory
(:mod:`mtrl.actors.shared_weights`) before each step, and writes the time each env step starts
into its arena's ``beat`` so the pool can still tell a hung step. A full slot is announced with
``UNROLL`` and belongs to the learner until ``RELEASE``; with two or more slots the actor keeps
stepping while the learner reads.

Faults: an exception (env build, reset or step) is sent as ``FAULT(kind, text)`` with the
innermost traceback line before the worker returns; ``kind`` is ``nan`` for non-finite env
output (:class:`~mtrl.actors.runner.NonFiniteError`), ``hang`` for a ``TimeoutError`` (an env
that timed out a step itself, as an external simulation does), else ``raise``. A worker process
ignores SIGINT (a Ctrl-C reaches the whole process group; the trainer owns shutdown) and has
:mod:`faulthandler` on, so a segfaulting env leaves its Python stack on stderr.
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import torch

from mtrl.actors import protocol as P
from mtrl.actors.core_states import CoreStates
from mtrl.actors.inference import InferenceModel
from mtrl.actors.runner import ActFn, EnvStepper, NonFiniteError
from mtrl.actors.shared_weights import WeightsLayout, WeightsReader
from mtrl.actors.shm import Arena, ArenaLayout
from mtrl.actors.unroll import UnrollBuffer


@dataclass(frozen=True, kw_only=True)
class ActorJob:
    """What any actor of a task runs, whatever the pool: which env, how many copies, its seed
    and unroll length (picklable, for a spawned process or a Ray worker)."""

    actor_id: int
    task: int
    task_name: str
    env_id: str
    num_envs: int
    seed: int
    unroll_length: int
    reward_scale: float
    env_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ActorSpec(ActorJob):
    """An actor worker of the parallel pool: its job and its unroll slots in shared memory;
    with local inference also the policy it acts with (a CPU copy of the learner's model) and
    where the learner publishes its weights."""

    layout: ArenaLayout
    num_slots: int
    policy: torch.nn.Module | None = None
    weights: WeightsLayout | None = None
    greedy: bool = False  # local inference: the policy's mode instead of a sample (tests)


#: The arena field where a local-inference actor writes when its current env step started
#: (``time.monotonic()``, system-wide on Linux), NaN while it waits for a free slot.
BEAT = "beat"


def fault_kind(e: BaseException) -> str:
    """The fault kind an env's exception counts as: ``nan`` for non-finite output, ``hang`` for
    a step that timed out inside the env (an external simulation past its own step timeout:
    any ``TimeoutError``), else ``raise``."""
    if isinstance(e, NonFiniteError):
        return "nan"
    return "hang" if isinstance(e, TimeoutError) else "raise"


def slot_arrays(arrays: dict, slot: int) -> dict:
    """The arrays of slot ``slot`` from an arena holding all of an actor's slots."""
    prefix = f"s{slot}:"
    return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}


class _Stopped(Exception):
    pass


def _own_process() -> bool:
    """True in a worker process (not in an actor thread of the learner process)."""
    return mp.parent_process() is not None and threading.current_thread() is threading.main_thread()


#: Set (to the actor id) in the environment of actor worker processes, so code running in
#: them (fault injection, plugins) can tell it is not in the learner's process.
ACTOR_PROCESS_ENV = "MTRL_ACTOR_PROCESS"


def _setup_process(actor_id: int) -> None:
    """Ignore Ctrl-C (the parent blocked SIGINT around the start, so none slipped through
    during start-up), dump the Python stack on fatal signals, say we are an actor."""
    os.environ[ACTOR_PROCESS_ENV] = str(actor_id)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    faulthandler.enable()


def actor_main(spec: ActorSpec, conn: Connection) -> None:
    """Worker entry point; returns when told to stop or when the server goes away."""
    env: Any = None
    stepper: EnvStepper | None = None
    arena: Arena | None = None
    reader: WeightsReader | None = None
    if _own_process():
        _setup_process(spec.actor_id)
    try:
        from mtrl.plugins import get_plugins
        from mtrl.plugins.external import sim_logs

        with sim_logs.for_task(spec.task_name):  # a simulation's logs: in the task's folder
            env_spec = get_plugins().envs.get(spec.env_id)
            env = env_spec.build(spec.num_envs, spec.seed, **spec.env_kwargs)
        stepper = EnvStepper(env, spec.reward_scale, f"{spec.task_name} (actor {spec.actor_id})")
        arena = Arena.attach(spec.layout)
        slots = [
            UnrollBuffer.from_arrays(spec.task, slot_arrays(arena.arrays, i))
            for i in range(spec.num_slots)
        ]
        beat = arena.arrays.get(BEAT)
        if spec.weights is not None and spec.policy is not None:
            reader = WeightsReader(spec.weights)
            act = local_act(spec.policy, reader, beat, greedy=spec.greedy)
        else:
            act = None
        _run(spec, conn, stepper, slots, act, beat)
    except (_Stopped, KeyboardInterrupt):
        pass
    except BaseException as e:  # the env's, or the server went away (then the send fails)
        text = "".join(traceback.format_exception_only(type(e), e)).strip()
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        if where is not None:
            text += f" (at {where.filename}:{where.lineno})"
        with contextlib.suppress(OSError):
            conn.send_bytes(P.fault(fault_kind(e), text))
    finally:
        if env is not None:
            with contextlib.suppress(Exception):
                env.close()
        if reader is not None:
            reader.close()
        if arena is not None:
            arena.close()
        conn.close()


def local_act(
    policy: torch.nn.Module,
    reader: WeightsReader,
    beat: np.ndarray | None,
    *,
    greedy: bool = False,
) -> ActFn:
    """The step function of an actor acting with its own copy of ``policy``: newer published
    weights first (so its actions lag the learner by what the server's would), then one
    forward; ``beat`` gets the time the env step that follows starts."""
    if _own_process():
        torch.set_num_threads(1)  # one core's worth of work per actor
    inference = InferenceModel(policy, greedy=greedy)
    states = CoreStates(inference)  # a recurrent model's per-env states

    def act(buf: UnrollBuffer, t: int) -> None:
        if reader.newer_than(inference.version):
            inference.version = reader.load(inference.model, inference.version)
        states.act_into(0, buf, t)
        if beat is not None:
            beat[0] = time.monotonic()

    return act


def _run(
    spec: ActorSpec,
    conn: Connection,
    stepper: EnvStepper,
    slots: list,
    local_fn: ActFn | None = None,
    beat: np.ndarray | None = None,
) -> None:
    """Fill slot after slot: ``local_fn`` acts (local inference), else the server does."""
    free = set(range(len(slots)))

    def handle(msg: bytes) -> bool:
        """Apply a server message; true when it is the awaited ``GO``."""
        kind = msg[:1]
        if kind == P.GO:
            return True
        if kind == P.RELEASE:
            free.add(P.parse_release(msg))
            return False
        if kind == P.STOP:
            raise _Stopped
        raise RuntimeError(f"actor {spec.actor_id}: unexpected message {msg[:8]!r}")

    slot_idx = 0

    def remote(buf: UnrollBuffer, t: int) -> None:
        conn.send_bytes(P.act(slot_idx, t))
        while not handle(conn.recv_bytes()):
            pass

    def local(buf: UnrollBuffer, t: int) -> None:
        while conn.poll():  # the learner's RELEASE and STOP, between steps
            handle(conn.recv_bytes())
        local_fn(buf, t)

    act = remote if local_fn is None else local
    conn.send_bytes(P.READY)
    stepper.start(slots[0])
    clock = time.perf_counter
    while True:
        free.discard(slot_idx)
        t0, env_s0 = clock(), stepper.env_seconds
        stepper.fill(slots[slot_idx], act)
        returns, lengths, successes = stepper.episodes.drain()
        info = P.UnrollInfo(
            slot=slot_idx,
            env_steps=spec.unroll_length * spec.num_envs,
            episode_returns=returns,
            episode_lengths=lengths,
            episode_successes=successes,
            env_seconds=stepper.env_seconds - env_s0,
            wall_seconds=clock() - t0,
            member_faults=stepper.drain_member_faults(),
            member_events=stepper.drain_member_events(),
            members_present=stepper.members_present(),
        )
        if beat is not None:
            beat[0] = np.nan  # not stepping: a wait for a free slot is not a hung step
        conn.send_bytes(P.unroll(info))
        nxt = (slot_idx + 1) % len(slots)
        while nxt not in free:
            handle(conn.recv_bytes())
        EnvStepper.carry(slots[slot_idx], slots[nxt])
        slot_idx = nxt
