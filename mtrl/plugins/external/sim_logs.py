"""Where a launched simulation's output goes, and how its last lines are quoted in errors.

Everything a simulation writes to stdout or stderr (every rank's, through ``mpiexec``) goes to
one log file per launched process. During ``mtrl train`` the trainer names a directory in the
run directory (:func:`use_dir` sets ``$MTRL_SIM_LOG_DIR``, which actor processes inherit), and
each process's log is kept there as ``<run_dir>/sim-logs/<task>/<n>.log``: ``<task>`` is the
task's name (its env id when it has none; whoever builds a task's env says which with
:func:`for_task`), so tasks of one env never share a folder, and ``n`` counts the task's
launches (restarts after a fault get new files, so the crashed one's log stays). An env built
outside any task keeps its logs under its env id.
Elsewhere (``mtrl validate``, ``mtrl envs``, a script) the log lives in the env's temporary
directory and goes with it when the env is closed; errors quote its last lines either way.

The launcher (:mod:`mtrl.coupling.launcher`) keeps each log under a cap
(``ExternalSim.log_max_bytes``): past it, the older half of the file is dropped and a line
says so, so a chatty code cannot fill the disk and the end (what matters after a crash) stays.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

#: The directory under which launched simulations keep their logs (set by the trainer).
LOG_DIR_ENV = "MTRL_SIM_LOG_DIR"

#: Default cap of one process's log, in bytes.
DEFAULT_MAX_BYTES = 4 << 20


#: The task whose env is being built in this thread (:func:`for_task`), else None.
_TASK: ContextVar[str | None] = ContextVar("mtrl_sim_log_task", default=None)


@contextmanager
def for_task(name: str | None) -> Iterator[None]:
    """Simulations launched inside (by building a task's env, in this thread) keep their logs
    in the folder of task ``name`` (``task.key``: its name, or its env id when it has none)."""
    token = _TASK.set(name)
    try:
        yield
    finally:
        _TASK.reset(token)


def use_dir(path: Path | None) -> None:
    """Keep the logs of simulations launched from now on (by this process and the processes
    it starts) under ``path``; None: in each env's temporary directory, deleted with it."""
    if path is None:
        os.environ.pop(LOG_DIR_ENV, None)
    else:
        os.environ[LOG_DIR_ENV] = str(path)


def new_log(env_id: str, temp_dir: Path, k: int) -> Path:
    """A fresh log file for process ``k`` of an env: numbered in ``$MTRL_SIM_LOG_DIR/<task>``
    (:func:`for_task`; the env id outside a task) when that is set (``O_EXCL``, so actors
    launching at once never share one), else ``temp_dir/<k>.log``."""
    root = os.environ.get(LOG_DIR_ENV)
    if not root:
        return temp_dir / f"{k}.log"
    name = _TASK.get() or env_id
    folder = Path(root).joinpath(*[p for p in name.split("/") if p not in ("", ".", "..")])
    folder.mkdir(parents=True, exist_ok=True)
    n = len(os.listdir(folder))
    while True:
        path = folder / f"{n}.log"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return path
        except FileExistsError:
            n += 1


def _kept(path: Path) -> bool:
    root = os.environ.get(LOG_DIR_ENV)
    return bool(root) and Path(root) in path.parents


#: The lines :func:`log_tail` puts around the quoted output, and the prefix of each quoted line.
TAIL_START = "--- the simulation's output, last lines ---"
TAIL_END = "--- end of the simulation's output"
QUOTE = "| "


def log_tail(path: Path | None, limit: int = 2000) -> str:
    """The last ``limit`` characters of a simulation's log, quoted on lines of their own
    (``| `` before each) between two lines of mtrl's, so that text mtrl adds after an error
    message (a location) never reads as the simulation's; '' when the log is empty."""
    if path is None or not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(size - limit, 0))
        text = f.read().decode(errors="replace").strip("\n")
    if not text.strip():
        return ""
    lines = text.splitlines()
    if size > limit and len(lines) > 1:
        lines = lines[1:]  # the first one is cut
    where = f" (whole log: {path})" if _kept(path) else ""
    quoted = "\n".join(f"{QUOTE}{line}".rstrip() for line in lines)
    return f"\n{TAIL_START}\n{quoted}\n{TAIL_END}{where} ---"
