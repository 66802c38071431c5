"""When a task's env fails in a way that stops ``mtrl train``: one line that says why, and
nothing lost that explains it.

* A simulation that cannot start (a typo in the module its plugin launches, a code that aborts
  before its handshake) while the trainer is being built: :class:`SimulationStartError`, one
  line with the simulation's own last output line. The run directory made for the run goes
  (nothing half-made is left), but the simulations' logs are moved out of it first
  (:func:`keep_start_logs`), so the path the line gives still exists.
* An env that crashes under serial actors, which have no fault tolerance:
  :func:`serial_crash_error`, one line, the checkpoint written of what was done and the
  command that resumes the run (process actors restart a crashed env instead).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from mtrl.coupling.protocol import SimulationError
from mtrl.errors import UserError
from mtrl.plugins.external.failure_line import one_line

#: Where the logs of simulations that failed a run's start are kept (under the temp folder).
KEPT_LOGS = "mtrl-sim-logs"


class SimulationStartError(UserError):
    """A task's simulation failed before training began, said in one line."""

    def __init__(self, where: str, cause: SimulationError, log: Path | None = None) -> None:
        """``where``: the task (``tasks[0] (heat2d)``), or '' when not known; ``log``: the
        simulation's log where it is now (default: the one ``cause`` carries)."""
        self.where, self.cause = where, cause
        self.log = log if log is not None else cause.log
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}the simulation could not start: {one_line(cause, self.log)}")

    def relocated(self, old_root: Path, new_root: Path | None) -> SimulationStartError:
        """The same error with its log's path under ``new_root`` if it was under
        ``old_root`` (the logs were moved: :func:`keep_start_logs`)."""
        log = self.log
        if new_root is not None and log is not None and Path(old_root) in Path(log).parents:
            log = new_root / Path(log).relative_to(old_root)
        return SimulationStartError(self.where, self.cause, log)


def keep_start_logs(run_dir: Path) -> Path | None:
    """Move ``run_dir/sim-logs`` (about to be deleted with a run that failed to start) to a
    folder of its own under the temp folder; returns it, or None when there were no logs."""
    logs = run_dir / "sim-logs"
    if not logs.is_dir() or not any(p.is_file() for p in logs.rglob("*")):
        return None
    parent = Path(tempfile.gettempdir()) / KEPT_LOGS
    parent.mkdir(parents=True, exist_ok=True)
    kept = Path(tempfile.mkdtemp(prefix=f"{run_dir.name}-", dir=parent))
    for entry in logs.iterdir():
        shutil.move(str(entry), str(kept / entry.name))
    return kept


def start_failure(error: BaseException, leaving: Path | None) -> UserError | None:
    """The one-line error for a trainer that failed to start with ``error``; None when
    ``error`` is not a simulation's failure (or already says what a user must fix).
    ``leaving``: the run directory about to be deleted, whose simulation logs are moved out
    first (:func:`keep_start_logs`) and named where they are then."""
    if isinstance(error, SimulationStartError):
        found = error
    elif isinstance(error, SimulationError) and not isinstance(error, UserError):
        found = SimulationStartError("", error)
    else:
        return None
    if leaving is None:
        return found
    return found.relocated(leaving / "sim-logs", keep_start_logs(leaving))


def with_checkpoint(error: UserError, run_dir: Path | None, checkpoint: Path | None) -> UserError:
    """``error`` (every task quarantined) with where the run stands and how to continue it."""
    lines = list(error.problems or [str(error)])
    if checkpoint is not None and run_dir is not None:
        lines.append(
            f"checkpoint written ({checkpoint.name}); continue with: mtrl train --resume {run_dir}"
        )
    return UserError("\n".join(lines), problems=lines)


def serial_crash_error(
    task: str, cause: BaseException, run_dir: Path | None, checkpoint: Path | None
) -> UserError:
    """The error that ends a run whose env crashed under serial actors: one line naming the
    task and the failure, then where the run stands and how to continue it."""
    lines = [
        f"task {task!r}: its env failed under serial actors, which stop the run on any fault: "
        f"{one_line(cause)}"
    ]
    if checkpoint is not None and run_dir is not None:
        lines.append(
            f"checkpoint written ({checkpoint.name}); continue with: mtrl train --resume "
            f"{run_dir} (with actors.mode: process, a crashed env is restarted instead)"
        )
    else:
        lines.append("no checkpoint written (no run directory, or checkpoint.enabled: false)")
    return UserError("\n".join(lines), problems=lines)
