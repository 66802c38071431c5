"""Launch learner ranks with the real launcher (torchrun) in subprocesses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
WORKER = HERE / "dist_worker.py"


def free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


def torchrun(
    args: list[str], out: Path, modes: list[str], worker: Path = WORKER
) -> subprocess.Popen[str]:
    """Start ``torchrun ARGS WORKER OUT MODES`` (not waited for; ``dist_worker.py`` unless
    told)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", *args, str(worker), str(out), *modes]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish(proc: subprocess.Popen[str], timeout: float) -> None:
    """Wait for a torchrun; on failure or timeout kill it and fail with its output's tail."""
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        raise AssertionError(f"torchrun timed out after {timeout} s:\n{output[-4000:]}") from None
    if proc.returncode != 0:
        raise AssertionError(f"torchrun exited {proc.returncode}:\n{_workers_output(output)}")


def _workers_output(output: str) -> str:
    """The ranks' own lines (tracebacks, aborts) first, then the launcher's summary."""
    ranks = [line for line in output.splitlines() if not line.startswith(("W", "I", "E1", "*"))]
    return "\n".join(ranks)[-6000:] + "\n--- torchrun ---\n" + output[-2000:]
