"""The link to one process of an external batch env: attached to, or bound and launched.

Attaching connects to the ``address`` a running simulation bound. Launching binds an address
(an ipc:// socket in the env's scratch directory, or a tcp:// loopback port with a fresh CURVE
key pair unless ``insecure``), fills the command template for the process, checks that its
program can start (:class:`~.spaces_check.SimulationCommandError` otherwise, before anything
runs), and starts it under the launcher (:mod:`mtrl.coupling.launcher`), which ends the
process tree if this process dies. The process's output goes to its log (:mod:`.sim_logs`),
headed by the command line.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtrl.coupling import curve
from mtrl.coupling import protocol as P
from mtrl.plugins.external import sim_logs
from mtrl.plugins.external.link import Link
from mtrl.plugins.external.settings import SimSettings, with_builtins
from mtrl.plugins.external.spaces_check import SimulationCommandError, command_problem

if TYPE_CHECKING:
    import zmq  # optional (mtrl[external]): imported when an env is built

#: The launcher script, run by path in an isolated interpreter (``python -I``).
LAUNCHER = Path(P.__file__).resolve().parent / "launcher.py"


def open_link(
    ctx: zmq.Context,
    sim: SimSettings,
    label: str,
    scratch: Path,
    k: int,
    n: int,
    seed: int,
    values: Mapping[str, Any],
    log_name: str,
) -> Link:
    """The link to process ``k`` (serving ``n`` copies from base seed ``seed``): attached to
    ``sim.address``, or bound in ``scratch`` with the process launched from ``values``."""
    bound = {"heartbeat_s": sim.heartbeat_s, "max_message_bytes": sim.max_message_bytes}
    if sim.address is not None:
        return Link(ctx, sim.address, bind=False, label=label, server_key=sim.server_key, **bound)
    address = f"ipc://{scratch}/{k}.sock" if sim.transport == "ipc" else "tcp://127.0.0.1:*"
    public, secret = (
        curve.keypair() if address.startswith("tcp") and not sim.insecure else (None, None)
    )
    link = Link(ctx, address, bind=True, label=label, server_key=public, **bound)
    if sim.transport == "tcp":
        import zmq

        link.address = address = link.sock.getsockopt_string(zmq.LAST_ENDPOINT)
    argv = sim.argv(with_builtins(values, address, n, seed))
    problem = command_problem(argv, sim.cwd, {**os.environ, **sim.env})
    if problem is not None:
        raise SimulationCommandError(f"{label}: {problem}")
    log = sim_logs.new_log(log_name, scratch, k)
    cap = ["--log-max-bytes", str(sim.log_max_bytes)]
    launcher = [sys.executable, "-I", str(LAUNCHER), str(os.getpid()), "2.0", *cap, "--", *argv]
    with open(log, "ab") as out:
        out.write(f"[mtrl: {shlex.join(argv)}]\n".encode())
        out.flush()
        link.process = subprocess.Popen(
            launcher,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=sim.cwd,
            env=curve.launch_env({**os.environ, **sim.env}, secret, sim.max_message_bytes),
            start_new_session=True,  # Ctrl-C goes to the trainer, which closes us
        )
    link.log = log
    link.label = f"{label}: {shlex.join(argv)}"
    return link
