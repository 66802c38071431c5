"""One connection to one simulation process (or to a simulation already running).

A :class:`Link` owns a ZeroMQ DEALER socket, a monitor of its disconnects, and, when mtrl
launched the simulation, the launcher process (:mod:`mtrl.coupling.launcher`) whose process
tree holds every rank. Every wait polls in short slices and checks, in turn: the reply, a
disconnect (the peer closed its socket, died, or stopped answering ZeroMQ heartbeats), the
launcher's exit (the simulation crashed: its exit status and the tail of its log go into the
error), and the deadline (a hang). Each ends in an exception the actor layer counts as a fault.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from mtrl.coupling import protocol as P


class SimulationError(RuntimeError):
    """An external simulation failed; the message names it and says how."""


class SimulationCrashed(SimulationError):
    """The simulation's processes exited without being asked to."""


class SimulationDisconnected(SimulationError):
    """The simulation closed its connection or stopped answering heartbeats."""


class SimulationTimeout(SimulationError, TimeoutError):
    """The simulation did not answer within the step (or start) timeout: it hangs."""


class SimulationReportedError(SimulationError):
    """The simulation answered with an ERROR message."""


#: Poll slice: how often a wait checks the launcher and the deadline.
_SLICE_MS = 50


def log_tail(path: Path | None, limit: int = 2000) -> str:
    """The last ``limit`` characters of a simulation's log, or ''."""
    if path is None or not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(f.tell() - limit, 0))
        text = f.read().decode(errors="replace").strip()
    return f"\n--- last lines of {path} ---\n{text}" if text else ""


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
    ) -> None:
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
        self.monitor = self.sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
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
        if code > 128 and code - 128 < 65:
            how = f"was killed by {signal.Signals(code - 128).name}"
        else:
            how = f"exited with status {code}"
        raise SimulationCrashed(
            f"{self.label}: the simulation {how} (a rank crashed, was killed, or the code "
            f"aborted){log_tail(self.log)}"
        )

    def _check_monitor(self) -> None:
        from zmq.utils.monitor import recv_monitor_message

        gone = False
        while self.monitor.poll(0):
            gone |= recv_monitor_message(self.monitor)["event"] == self._zmq.EVENT_DISCONNECTED
        if gone:
            self.broken = True
            self._check_process(grace_s=1.0)  # a crash explains itself better
            raise SimulationDisconnected(
                f"{self.label}: the simulation at {self.address} disconnected (closed its "
                "socket, died, or stopped answering ZeroMQ heartbeats)" + log_tail(self.log)
            )

    def _timeout(self, what: str, timeout_s: float) -> SimulationTimeout:
        self.broken = True
        return SimulationTimeout(
            f"{self.label}: no answer to {what} within {timeout_s:g}s: the simulation hangs "
            "(raise the env's step_timeout_s if its steps are really that slow)"
            + log_tail(self.log)
        )

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
        head = P.Header(op, self.seq, count, arg).pack()
        while not self._out_poller.poll(0):
            self._check_process()
            self._check_monitor()
            if time.monotonic() > deadline:
                raise self._timeout(f"{P.OP_NAMES[op]} (never connected)", timeout_s)
            self._out_poller.poll(_SLICE_MS)
        self.sock.send_multipart([head, *frames], copy=False)
        return self.seq

    def recv(self, seq: int, *, deadline: float, timeout_s: float, what: str) -> tuple:
        """Wait for the reply to request ``seq``; returns ``(header, frames)``."""
        while True:
            events = dict(self.poller.poll(_SLICE_MS))
            if self.sock in events:
                frames = self.sock.recv_multipart(copy=False)
                head = P.Header.unpack(frames[0].buffer)
                if head.seq != seq and head.op != P.ERROR:
                    continue  # a late answer to a request that already timed out
                if head.op == P.ERROR:
                    text = (
                        bytes(frames[1].buffer).decode(errors="replace") if len(frames) > 1 else ""
                    )
                    raise SimulationReportedError(f"{self.label}: the simulation reported: {text}")
                return head, frames[1:]
            if self.monitor in events:
                self._check_monitor()
            self._check_process()
            if time.monotonic() > deadline:
                raise self._timeout(what, timeout_s)

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
        with contextlib.suppress(Exception):
            self.sock.disable_monitor()
        self.monitor.close(linger=0)
        self.sock.close(linger=0)
        self.sock = None
