"""One connection to one simulation process (or to a simulation already running).

A :class:`Link` owns a ZeroMQ DEALER socket, a monitor of its disconnects, and, when mtrl
launched the simulation, the launcher process (:mod:`mtrl.coupling.launcher`) whose process
tree holds every rank. Every wait polls in short slices and checks, in turn: the reply, a
disconnect (the peer closed its socket, died, or stopped answering ZeroMQ heartbeats), the
launcher's exit (the simulation crashed: its exit status and the tail of its log go into the
error), and the deadline (a hang). Each ends in an exception the actor layer counts as a fault.

Nothing a peer sends is trusted: libzmq refuses a frame over ``max_message_bytes`` before
allocating it (``ZMQ_MAXMSGSIZE``), and every reply is checked before it is returned: at most
:data:`~mtrl.coupling.protocol.MAX_FRAMES` frames, within :data:`HANDSHAKE_MAX_BYTES
<mtrl.coupling.protocol.HANDSHAKE_MAX_BYTES>` before the handshake and within what its spec
allows after it, the op of the request, and the exact frame sizes of that op. Over tcp:// the
link is a CURVE client of the simulation's public key (:mod:`mtrl.coupling.curve`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from mtrl.coupling import curve, peers
from mtrl.coupling import protocol as P
from mtrl.coupling.peers import PeerWatch
from mtrl.coupling.protocol import ProtocolError, SimulationError
from mtrl.plugins.external.sim_logs import log_tail


class SimulationCrashed(SimulationError):
    """The simulation's processes exited without being asked to."""


class SimulationDisconnected(SimulationError):
    """The simulation closed its connection or stopped answering heartbeats."""


class SimulationTimeout(SimulationError, TimeoutError):
    """The simulation did not answer within the step (or start) timeout: it hangs."""


class SimulationReportedError(SimulationError):
    """The simulation answered with an ERROR message."""


#: env_kwargs that set an :class:`~mtrl.plugins.external.ExternalSim`'s transport security.
SECURITY_KWARGS = ("server_key", "insecure", "max_message_bytes")


def check_transport(name: str, address: str | None, server_key: str | None, insecure: bool) -> None:
    """Refuse plain tcp:// to a non-loopback ``address`` unless ``insecure`` (a config error,
    :class:`~mtrl.errors.EnvKwargsError`, that names the address and both fixes)."""
    from mtrl.errors import EnvKwargsError

    if address is None or server_key is not None or insecure:
        return
    problem = curve.plain_problem(address)
    if problem:
        raise EnvKwargsError(
            f"{name}: {problem}. Give the simulation's CURVE public key as server_key "
            "(ExternalSim(server_key=...) or env_kwargs; the simulation runs with "
            f"{curve.SECRET_KEY_ENV}, `python -m mtrl.coupling.curve` makes a pair), or set "
            "insecure: true in env_kwargs on a network you trust"
        )


#: Poll slice: how often a wait checks the launcher and the deadline.
_SLICE_MS = 50


#: What a shell's exit statuses mean (the launcher uses them too when it cannot start a code).
_SHELL_STATUS = {
    127: "exited with status 127: command not found (a program in the command is missing)",
    126: "exited with status 126: command not executable (a program in the command lacks +x)",
}


class Link:
    """A socket to one simulation, with the process that runs it (if mtrl launched it)."""

    def __init__(
        self,
        ctx: Any,
        address: str,
        *,
        bind: bool,
        label: str,
        heartbeat_s: float,
        process: subprocess.Popen | None = None,
        log: Path | None = None,
        server_key: str | None = None,
        max_message_bytes: int = curve.DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        """``server_key``: the simulation's CURVE public key (tcp://; None: plain).
        ``max_message_bytes``: the largest frame libzmq accepts from the peer."""
        import zmq

        from mtrl.coupling.client import heartbeat_options

        self.label = label
        self.address = address
        self.process = process
        self.log = log
        self.seq = 0
        self.broken = False  # set once a failure was raised: close() then skips the goodbye
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        for opt, value in heartbeat_options(heartbeat_s).items():
            self.sock.setsockopt(opt, value)
        self.max_message_bytes = int(max_message_bytes)
        curve.set_limit(self.sock, self.max_message_bytes)
        if server_key is not None:
            curve.set_client(self.sock, server_key)
        self.spec: P.SimSpec | None = None  # from the HELLO reply
        self.count = 0  # copies this process serves, from the HELLO reply
        self.limit = P.HANDSHAKE_MAX_BYTES  # bytes a reply may hold; the handshake sets it
        self._asked = (0, 0)  # (op, HELLO's count) of the request awaiting its reply
        self.watch = PeerWatch(self.sock, bound=bind)
        self.monitor = self.watch.monitor
        (self.sock.bind if bind else self.sock.connect)(address)
        self.poller = zmq.Poller()
        self.poller.register(self.sock, zmq.POLLIN)
        self.poller.register(self.monitor, zmq.POLLIN)
        self._out_poller = zmq.Poller()
        self._out_poller.register(self.sock, zmq.POLLOUT)
        self._zmq = zmq

    # -- failures ---------------------------------------------------------------------------
    def _check_process(self, grace_s: float = 0.0) -> None:
        """Raise :class:`SimulationCrashed` if the launched simulation has exited."""
        p = self.process
        if p is None:
            return
        code = p.poll()
        if code is None and grace_s > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = p.wait(timeout=grace_s)
        if code is None:
            return
        self.broken = True
        if code in _SHELL_STATUS:
            how = _SHELL_STATUS[code]
        elif code > 128 and code - 128 < 65:
            how = f"was killed by {signal.Signals(code - 128).name} (a rank crashed or was killed)"
        else:
            how = f"exited with status {code} (a rank crashed, was killed, or the code aborted)"
        raise self._with_log(
            SimulationCrashed(f"{self.label}: the simulation {how}{log_tail(self.log)}")
        )

    def _check_monitor(self) -> None:
        """Raise :class:`SimulationDisconnected` when the simulation's connection is gone
        (:class:`~mtrl.coupling.peers.PeerWatch`: a stranger's failed knock on a bound link
        is not the simulation leaving)."""
        state = self.watch.check()
        if state is None:
            return
        self.broken = True
        if state == peers.FAILED:
            raise SimulationDisconnected(
                f"{self.label}: the security handshake with {self.address} failed: the "
                "simulation does not hold the secret key of server_key, or one side speaks "
                "CURVE and the other plain tcp:// (docs/COUPLING.md, section 2)"
            )
        self._check_process(grace_s=1.0)  # a crash explains itself better
        raise self._with_log(
            SimulationDisconnected(
                f"{self.label}: the simulation at {self.address} disconnected (closed its "
                "socket, died, stopped answering ZeroMQ heartbeats, or sent a frame over "
                f"max_message_bytes={self.max_message_bytes})" + log_tail(self.log)
            )
        )

    def _timeout(self, what: str, timeout_s: float) -> SimulationTimeout:
        self.broken = True
        failed = self.watch.failed_handshakes
        knocks = (
            f" ({failed} connection(s) failed the security handshake: does "
            f"the code read {curve.SECRET_KEY_ENV}? docs/COUPLING.md, section 2)"
            if failed
            else ""
        )
        return self._with_log(
            SimulationTimeout(
                f"{self.label}: no answer to {what} within {timeout_s:g}s: the simulation hangs "
                f"(raise the env's step_timeout_s if its steps are really that slow){knocks}"
                + log_tail(self.log)
            )
        )

    def _with_log(self, error: SimulationError) -> Any:
        """``error`` with this simulation's log attached (``SimulationError.log``)."""
        error.log = self.log
        return error

    # -- messages ---------------------------------------------------------------------------
    def send(
        self,
        op: int,
        frames: list,
        *,
        deadline: float,
        timeout_s: float,
        count: int = 0,
        arg: int = 0,
    ) -> int:
        """Send a request (waiting for the peer to connect if needed); returns its seq."""
        self.seq = (self.seq + 1) & 0xFFFFFFFF
        self._asked = (op, count)
        head = P.Header(op, self.seq, count, arg).pack()
        while not self._out_poller.poll(0):
            self._check_process()
            self._check_monitor()
            if time.monotonic() > deadline:
                raise self._timeout(f"{P.OP_NAMES[op]} (never connected)", timeout_s)
            self._out_poller.poll(_SLICE_MS)
        self.watch.had_peer = True
        self.sock.send_multipart([head, *frames], copy=False)
        return self.seq

    def recv(self, seq: int, *, deadline: float, timeout_s: float, what: str) -> tuple:
        """Wait for the reply to request ``seq``; returns ``(header, frames)``.

        Replies to earlier requests (late answers to ones that timed out) are dropped; a flood
        of them still ends at the deadline."""
        while True:
            events = dict(self.poller.poll(_SLICE_MS))
            if self.sock in events:
                reply = self._receive(seq)
                if reply is not None:
                    return reply
            elif self.monitor in events:
                self._check_monitor()
            self._check_process()
            if time.monotonic() > deadline:
                raise self._timeout(what, timeout_s)

    def try_send(self, op: int, frames: list, *, count: int = 0, arg: int = 0) -> int | None:
        """Send a request if the peer is connected, else None, without waiting (raises as
        :meth:`send` does when the simulation crashed or left)."""
        if not self._out_poller.poll(0):
            self._check_process()
            self._check_monitor()
            return None
        self.seq = (self.seq + 1) & 0xFFFFFFFF
        self._asked = (op, count)
        self.watch.had_peer = True
        head = P.Header(op, self.seq, count, arg).pack()
        self.sock.send_multipart([head, *frames], copy=False)
        return self.seq

    def poll(self, seq: int) -> tuple | None:
        """The reply to request ``seq`` if it has arrived, else None, without waiting (raises
        as :meth:`recv` does, but never for a deadline: the caller keeps its own)."""
        while True:
            events = dict(self.poller.poll(0))
            if self.sock in events:
                reply = self._receive(seq)
                if reply is not None:
                    return reply
                continue
            if self.monitor in events:
                self._check_monitor()
            self._check_process()
            return None

    def _receive(self, seq: int) -> tuple | None:
        """Take one message: the checked reply to ``seq``, or None for a stale one."""
        frames = self.sock.recv_multipart(copy=False)
        try:
            return self._check_reply(seq, frames)
        except ProtocolError as e:
            self.broken = True
            raise ProtocolError(f"{self.label}: {e}") from None

    def _check_reply(self, seq: int, frames: list) -> tuple | None:
        size = sum(len(f) for f in frames)
        if len(frames) > P.MAX_FRAMES or size > self.limit:
            when = "before the handshake" if self.spec is None else "for this spec"
            raise ProtocolError(
                f"a message of {len(frames)} frames and {size} bytes; {when} at most "
                f"{P.MAX_FRAMES} frames and {self.limit} bytes"
            )
        head = P.Header.unpack(frames[0].buffer)
        if head.op == P.ERROR:
            text = bytes(frames[1].buffer).decode(errors="replace") if len(frames) > 1 else ""
            if len(text) > 2000:
                text = text[:2000] + "..."
            raise self._with_log(
                SimulationReportedError(f"{self.label}: the simulation reported: {text}")
            )
        if head.seq != seq:
            return None  # a late answer to a request that already timed out
        op, count = self._asked
        if head.op != op:
            raise ProtocolError(f"answered {P.OP_NAMES[head.op]} to a {P.OP_NAMES[op]} request")
        body = frames[1:]
        if op == P.HELLO:
            self._handshake(head, body, count)
        elif self.spec is not None:
            n, obs = self.count, self.spec.observation.nbytes
            want = {P.RESET: [n * obs], P.STEP: [n * obs, 4 * n, n, n], P.CLOSE: []}[op]
            sizes = [len(f) for f in body]
            if sizes != want:
                raise ProtocolError(
                    f"the {P.OP_NAMES[op]} reply's frames have {sizes} bytes, not {want}"
                )
        return head, body

    def _handshake(self, head: P.Header, body: list, count: int) -> None:
        """Check a HELLO reply and fix the sizes every later reply must have."""
        if head.count != count or len(body) != 1:
            raise ProtocolError(
                f"the HELLO reply serves {head.count} copies in {len(body)} frames; "
                f"{count} copies were asked for, with the spec in 1 frame"
            )
        spec = P.parse_spec(bytes(body[0].buffer))
        for what, part in (("observations", spec.observation), ("actions", spec.action)):
            largest = count * part.nbytes
            if largest > self.max_message_bytes:
                self.broken = True
                raise SimulationError(
                    f"{self.label}: the spec's {what} for {count} copies take {largest} bytes "
                    f"in one frame, over max_message_bytes={self.max_message_bytes}: raise "
                    "max_message_bytes (ExternalSim or env_kwargs) or serve fewer copies per "
                    "process"
                )
        self.spec, self.count, self.limit = spec, count, P.reply_bytes(spec, count)

    def close(self, grace_s: float = 2.0) -> None:
        """Ask the simulation to stop (CLOSE), then end its processes; safe to call twice."""
        if self.sock is None:
            return
        if not self.broken and (self.process is None or self.process.poll() is None):
            with contextlib.suppress(Exception):
                deadline = time.monotonic() + min(grace_s, 1.0)
                seq = self.send(P.CLOSE, [], deadline=deadline, timeout_s=grace_s)
                self.recv(seq, deadline=deadline, timeout_s=grace_s, what="CLOSE")
        p = self.process
        if p is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=0.0 if self.broken else grace_s)
            if p.poll() is None:
                p.terminate()  # the launcher cleans the whole tree up on SIGTERM
                try:
                    p.wait(timeout=grace_s + 3.0)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(OSError):  # its own session: pgid == pid
                        os.killpg(p.pid, signal.SIGKILL)
                    p.kill()
                    p.wait(timeout=5.0)
        self.watch.close()
        self.sock.close(linger=0)
        self.sock = None
