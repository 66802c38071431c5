"""The Python client: couple a simulation written in Python to mtrl (docs/COUPLING.md).

Write a class with four methods and hand it to :func:`serve`::

    class Sim:
        def hello(self, num_envs, seed):      # -> spec bytes (protocol.spec_json)
        def reset(self):                      # -> obs (num_envs, *obs_shape)
        def step(self, actions, reset_mask):  # -> obs, reward, terminated, truncated
        def close(self):                      # optional

    serve(Sim(), "ipc:///tmp/x")             # connect to the address mtrl bound

``step`` must reset (not step) the copies whose ``reset_mask`` is true and return their first
observation with reward 0 and both flags false. An exception in any method is sent to mtrl as an
ERROR message (mtrl raises it as a fault of the env) and ``serve`` goes on waiting.

:func:`serve` returns when mtrl sends CLOSE, or when the peer disappears: ZeroMQ heartbeats
(``heartbeat_s``) drop a connection whose peer stopped answering, and a socket monitor reports
the disconnect, so a simulation never outlives the trainer that drove it. Only rank 0 of an MPI
code calls this; it relays requests to the other ranks itself.

Security comes from the environment (:func:`mtrl.coupling.curve.simulation_side`):
``MTRL_CURVE_SECRET_KEY`` makes the socket a CURVE server (mtrl sets it for the codes it
launches over tcp://); plain tcp:// on a non-loopback address is refused unless
``MTRL_COUPLING_INSECURE=1``; ``MTRL_MAX_MESSAGE_BYTES`` bounds every frame received.
"""

from __future__ import annotations

import time
import traceback
from typing import Any, Protocol

import numpy as np

from mtrl.coupling import curve
from mtrl.coupling import protocol as P
from mtrl.coupling.peers import PeerWatch


class Simulation(Protocol):
    """What :func:`serve` drives (``close`` is optional)."""

    def hello(self, num_envs: int, seed: int) -> bytes: ...

    def reset(self) -> np.ndarray: ...

    def step(self, actions: np.ndarray, reset_mask: np.ndarray) -> tuple[Any, Any, Any, Any]: ...


#: Why :func:`serve` returned.
CLOSED, PEER_GONE, IDLE, GOODBYE = "closed", "peer-gone", "idle", "goodbye"


class Goodbye(Exception):
    """Raised by a simulation's method to leave the run cleanly (an attached code that
    announced itself): :func:`serve` withdraws its announcement, closes its socket without
    answering, and returns :data:`GOODBYE`; mtrl cuts its copies' episodes and frees its slot."""


def heartbeat_options(heartbeat_s: float) -> dict[int, int]:
    """ZeroMQ socket options for ZMTP heartbeats: ping every ``heartbeat_s``, drop the
    connection after three silent intervals (libzmq answers pings from its I/O thread, so a
    busy but live peer keeps its connection; a frozen or vanished one loses it)."""
    import zmq

    ivl = max(int(heartbeat_s * 1000), 1)
    return {zmq.HEARTBEAT_IVL: ivl, zmq.HEARTBEAT_TIMEOUT: 3 * ivl, zmq.HEARTBEAT_TTL: 3 * ivl}


def _as(arr: Any, dtype: Any, n: int, what: str) -> bytes:
    a = np.ascontiguousarray(arr, dtype=dtype)
    if a.shape[:1] != (n,):
        raise P.ProtocolError(f"{what} must have leading dimension {n}, got shape {a.shape}")
    return a.tobytes()


class _Session:
    """One handshake's state: the copies served and the sizes the spec fixed."""

    def __init__(self, num_envs: int, spec: P.SimSpec) -> None:
        self.n = num_envs
        self.spec = spec
        self.action_bytes = num_envs * spec.action.nbytes
        self.obs_dtype = spec.observation.dtype
        self.obs_shape = (num_envs, *spec.observation.shape)

    def obs(self, obs: Any) -> bytes:
        a = np.ascontiguousarray(obs, dtype=self.obs_dtype)
        if a.shape != self.obs_shape:
            raise P.ProtocolError(f"observation must have shape {self.obs_shape}, got {a.shape}")
        return a.tobytes()


def serve(
    sim: Simulation,
    address: str,
    *,
    bind: bool = False,
    heartbeat_s: float = 1.0,
    idle_timeout_s: float | None = None,
    exit_on_disconnect: bool = True,
    announce: str | None = None,
) -> str:
    """Answer mtrl's requests on ``address`` until CLOSE (returns ``"closed"``), the peer is
    gone (``"peer-gone"``) or nothing arrived for ``idle_timeout_s`` (``"idle"``).

    ``bind=False`` (launched by mtrl: connect to the address in the command line); ``bind=True``
    for a long-running simulation that mtrl attaches to, usually with
    ``exit_on_disconnect=False`` so it waits for the next trainer.

    ``announce`` (with ``bind=True``): a directory (the env's ``members_dir``) in which to
    announce the bound address, so that a running training attaches to this code as a new
    member of its batch (:mod:`mtrl.coupling.announce`). A method that raises :class:`Goodbye`
    leaves the run cleanly (returns ``"goodbye"``).
    """
    import zmq

    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 1000)
    for opt, value in heartbeat_options(heartbeat_s).items():
        sock.setsockopt(opt, value)
    try:
        curve.simulation_side(sock, address)
    except BaseException:
        sock.close(linger=0)
        raise
    watch = PeerWatch(sock, bound=bind)
    monitor = watch.monitor
    (sock.bind if bind else sock.connect)(address)
    announced = None
    if announce is not None:
        from mtrl.coupling import announce as A

        announced = A.announce(announce, A.reachable(sock.getsockopt_string(zmq.LAST_ENDPOINT)))
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    poller.register(monitor, zmq.POLLIN)
    session: _Session | None = None
    last = time.monotonic()
    try:
        while True:
            timeout = None if idle_timeout_s is None else max(idle_timeout_s * 1000, 1)
            events = dict(poller.poll(timeout))
            if monitor in events and watch.check() is not None:  # gone, or a failed handshake
                if exit_on_disconnect:
                    return PEER_GONE
                session = None  # the next trainer starts with HELLO
            if sock not in events:
                if idle_timeout_s is not None and time.monotonic() - last > idle_timeout_s:
                    return IDLE
                continue
            last = time.monotonic()
            watch.had_peer = True
            frames = sock.recv_multipart(copy=False)
            try:
                head = P.Header.unpack(frames[0].buffer)
            except P.ProtocolError as e:
                sock.send_multipart([P.Header(P.ERROR, 0).pack(), str(e).encode()])
                continue
            try:
                reply, session = _answer(sim, head, frames[1:], session)
            except Goodbye:
                if announced is not None:
                    A.withdraw(announced)  # first: mtrl reads its absence as a goodbye
                return GOODBYE
            except Exception as e:
                text = "".join(traceback.format_exception_only(type(e), e)).strip()
                sock.send_multipart([P.Header(P.ERROR, head.seq).pack(), text.encode()])
                continue
            sock.send_multipart(reply, copy=False)
            if head.op == P.CLOSE:
                return CLOSED
    finally:
        if announced is not None:
            A.withdraw(announced)
        close = getattr(sim, "close", None)
        if callable(close):
            close()
        watch.close()
        sock.close()


def _answer(
    sim: Simulation, head: P.Header, frames: list, session: _Session | None
) -> tuple[list, _Session | None]:
    """The reply frames to one request (raises on a bad request or a simulation error)."""
    out = [P.Header(head.op, head.seq).pack()]
    if head.op == P.HELLO:
        spec_bytes = sim.hello(int(head.count), int(head.arg))
        session = _Session(int(head.count), P.parse_spec(spec_bytes))
        out[0] = P.Header(P.HELLO, head.seq, count=head.count).pack()
        return [*out, spec_bytes], session
    if head.op == P.CLOSE:
        return out, session
    if session is None:
        raise P.ProtocolError(f"{P.OP_NAMES[head.op]} before HELLO")
    if head.op == P.RESET:
        return [*out, session.obs(sim.reset())], session
    if head.op != P.STEP:
        raise P.ProtocolError(f"unexpected request {P.OP_NAMES[head.op]}")
    if len(frames) != 2 or len(frames[0]) != session.action_bytes or len(frames[1]) != session.n:
        sizes = [len(f) for f in frames]
        raise P.ProtocolError(
            f"STEP needs 2 frames of {session.action_bytes} and {session.n} bytes, got {sizes}"
        )
    spec = session.spec.action
    actions = np.frombuffer(frames[0].buffer, spec.dtype).reshape(session.n, *spec.shape)
    mask = np.frombuffer(frames[1].buffer, np.uint8).astype(bool)
    obs, reward, terminated, truncated = sim.step(actions, mask)
    n = session.n
    out += [
        session.obs(obs),
        _as(reward, "<f4", n, "reward"),
        _as(terminated, np.uint8, n, "terminated"),
        _as(truncated, np.uint8, n, "truncated"),
    ]
    return out, session
