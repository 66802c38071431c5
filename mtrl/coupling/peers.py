"""Telling a lost peer from a stranger's knock, from a DEALER socket's monitor events.

libzmq reports ``EVENT_DISCONNECTED`` for every connection that closes, including ones that
never completed the handshake: anyone who can reach a tcp:// port can connect and leave (or
fail CURVE), and a socket that took that for its peer leaving would let any stranger end a
training env or reset an attached simulation. So on a **bound** socket a disconnect counts only
when the socket had a peer and no longer has one: a DEALER can send (POLLOUT) exactly while a
peer that completed the handshake is attached. A **connecting** socket has one connection, its
own: there a disconnect is the peer leaving and a failed handshake is a configuration error
(wrong key, or CURVE on one side only). Shared by mtrl's link and the Python client; the C
client applies the same rule.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

#: What :meth:`PeerWatch.check` reports.
GONE, FAILED = "gone", "handshake-failed"


class PeerWatch:
    """The monitor of one socket and the rule above."""

    def __init__(self, sock: Any, *, bound: bool) -> None:
        import zmq

        self.sock = sock
        self.bound = bound
        self.had_peer = False  # set by the owner once a peer was seen (a send or a receipt)
        self.failed_handshakes = 0
        self._zmq = zmq
        self._failed = (
            zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
            | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
            | zmq.EVENT_HANDSHAKE_FAILED_AUTH
        )
        self.monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED | self._failed)

    def check(self) -> str | None:
        """Drain the monitor: :data:`GONE`, :data:`FAILED` (connecting sockets only) or None."""
        from zmq.utils.monitor import recv_monitor_message

        lost = failed = False
        while self.monitor.poll(0):
            event = recv_monitor_message(self.monitor)["event"]
            lost |= event == self._zmq.EVENT_DISCONNECTED
            if event & self._failed:
                failed = True
                self.failed_handshakes += 1
        if self.bound:
            return GONE if lost and self.had_peer and not self.attached() else None
        if failed:
            return FAILED
        return GONE if lost else None

    def attached(self, grace_s: float = 0.2) -> bool:
        """Whether a peer is still attached, giving libzmq ``grace_s`` to detach a lost one."""
        end = time.monotonic() + grace_s
        while self.sock.poll(0, self._zmq.POLLOUT):
            if time.monotonic() > end:
                return True
            time.sleep(0.005)
        return False

    def close(self) -> None:
        """Stop monitoring and close the monitor socket."""
        with contextlib.suppress(Exception):
            self.sock.disable_monitor()
        self.monitor.close(linger=0)
