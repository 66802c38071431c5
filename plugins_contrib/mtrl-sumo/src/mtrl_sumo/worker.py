"""A process that serves one :class:`~mtrl_sumo.simulation.GridSimulation` to its parent.

libsumo allows one simulation per process, so each env of the task runs its simulation here:
``python -m mtrl_sumo.worker FD``, where ``FD`` is this end of a socket pair (no network port
is opened). Requests are ``(command, argument)`` tuples over a
:class:`multiprocessing.connection.Connection`: ``("init", settings)``, ``("reset", seed)``,
``("step", actions)``, ``("close", None)``; replies are ``("ok", value)`` or
``("error", "Type: message")``.

The worker dies with its parent: the kernel sends it SIGKILL when the parent exits
(``PR_SET_PDEATHSIG``, which reaches a stopped process too), and a closed socket ends it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from dataclasses import asdict
from multiprocessing.connection import Connection
from typing import Any

PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the closed socket ends it
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def serve(conn: Connection) -> None:
    """Answer requests until ``close`` or the parent's end of the socket closes."""
    from mtrl_sumo.simulation import GridSimulation

    sim: GridSimulation | None = None
    try:
        while True:
            try:
                command, arg = conn.recv()
            except EOFError:
                return
            if command == "close":
                return
            try:
                reply: Any
                if command == "init":
                    sim, reply = GridSimulation(**arg), None
                elif sim is None:
                    raise RuntimeError(f"{command!r} before 'init'")
                elif command == "reset":
                    reply = sim.reset(int(arg))
                elif command == "step":
                    obs, rewards, done = sim.step(arg)
                    episode = asdict(sim.episode) if done and sim.episode else None
                    reply = (obs, rewards, done, episode)
                else:
                    raise ValueError(f"unknown command {command!r}")
            except Exception as e:  # reported to the parent, which raises it as an env error
                conn.send(("error", f"{type(e).__name__}: {e}"))
            else:
                conn.send(("ok", reply))
    finally:
        if sim is not None:
            sim.close()


def main(argv: list[str]) -> int:
    _die_with_parent(int(argv[1]))
    serve(Connection(int(argv[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
