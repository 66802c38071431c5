"""When a run writes its checkpoints, and what a disk that fails one does to the run.

Cadence: ``checkpoint.every_s`` seconds or ``checkpoint.every_env_steps`` env steps since the
last checkpoint, whichever comes first. The time interval stretches to :data:`WRITE_SHARE`
times the last write's duration, so a large checkpoint (a SAC replay kept by
``checkpoint.replay``) never takes more than 1/:data:`WRITE_SHARE` of the run's time, while a
small one (a quickstart's: about 20 ms) is written every minute.

Disk faults (:mod:`mtrl.disk_faults`: full, read-only, the run directory removed) never cost a
checkpoint already written (:func:`mtrl.checkpoint.save_checkpoint`). Then
``checkpoint.on_disk_error`` decides: ``stop`` ends the run at the next round with
:class:`DiskStop`, one line naming the fault, where, and how to continue; ``continue`` warns
once and tries every later checkpoint again.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mtrl.checkpoint import (
    CheckpointError,
    CheckpointWriteError,
    checkpoint_step,
    list_checkpoints,
    save_checkpoint,
)
from mtrl.config import CheckpointConfig

#: The time interval is at least this many times the last write's duration (a 2% share).
WRITE_SHARE = 50.0


class DiskStop(CheckpointError):
    """A run stopped because the disk failed a checkpoint (``checkpoint.on_disk_error:
    stop``). ``result`` is the run's :class:`~mtrl.train.progress.TrainResult` so far."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class Checkpoints:
    """A run's checkpoint writer: cadence, writes, and the disk-fault policy."""

    def __init__(self, ck: CheckpointConfig, run_dir: Path | None) -> None:
        self.ck = ck
        self.run_dir = run_dir
        self.last_write_s = 0.0
        """Seconds the newest successful write took (capture excluded)."""
        self.fault: CheckpointWriteError | None = None
        """The newest write the disk failed, until a later one succeeds."""
        self._warned = False

    @property
    def stopping(self) -> bool:
        """A write failed and ``on_disk_error: stop``: the run ends, no more writes."""
        return self.fault is not None and self.ck.on_disk_error == "stop"

    def due(self, steps_since: int, seconds_since: float) -> bool:
        """Whether a periodic checkpoint is due, ``steps_since`` env steps and
        ``seconds_since`` seconds after the last one (module docstring)."""
        ck = self.ck
        if not ck.enabled or self.stopping:
            return False
        every_s = ck.every_s and max(ck.every_s, WRITE_SHARE * self.last_write_s)
        return bool(
            (ck.every_env_steps and steps_since >= ck.every_env_steps)
            or (every_s and seconds_since >= every_s)
        )

    def write(self, state: Callable[[], dict[str, Any]], step: int) -> Path | None:
        """Capture ``state()`` and write it as the checkpoint of ``step``; None when there is
        no run directory (a replica that is not rank 0 still captures: a sharded learner's
        state is gathered from every rank), when the run is stopping, or when the disk failed
        the write (then :attr:`fault` says why)."""
        captured = state()
        if self.run_dir is None or self.stopping:
            return None
        start = time.perf_counter()
        try:
            path = save_checkpoint(self.run_dir, captured, step, self.ck.keep_last, create=False)
        except CheckpointWriteError as e:
            self.fault = e
            if self.ck.on_disk_error == "continue" and not self._warned:
                self._warned = True
                print(
                    f"WARNING: {e}; training goes on without checkpoints "
                    f"(checkpoint.on_disk_error: continue); {self._newest()}",
                    flush=True,
                )
            return None
        self.last_write_s = time.perf_counter() - start
        if self.fault is not None:
            print(f"checkpoints written again: {path}", flush=True)
            self.fault = None
        return path

    def stop_message(self) -> str:
        """The one line a run stopped by a disk fault ends with (``on_disk_error: stop``)."""
        assert self.fault is not None and self.run_dir is not None
        if not self.run_dir.is_dir():
            return (
                f"{self.fault}; the run stopped: its run directory and checkpoints are gone, "
                "start it again"
            )
        ckpts = list_checkpoints(self.run_dir)
        if not ckpts:
            return (
                f"{self.fault}; the run stopped before its first checkpoint: "
                f"{self._remedy()} and start it again (checkpoint.on_disk_error: continue "
                "trains on without checkpoints)"
            )
        return (
            f"{self.fault}; the run stopped; {self._newest()}: {self._remedy()}, then continue "
            f"with: mtrl train --resume {self.run_dir} (checkpoint.on_disk_error: continue "
            "trains on without checkpoints)"
        )

    def _remedy(self) -> str:
        assert self.fault is not None
        if self.fault.fault.errno in (errno.ENOSPC, errno.EDQUOT):
            return "make room"
        if self.fault.fault.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return "make the run directory writable"
        return "fix the disk"

    def final_warning(self) -> str | None:
        """What to say when the run ended without its final checkpoint (``continue``)."""
        if self.fault is None or self.stopping:
            return None
        return f"WARNING: the final {self.fault}: the trained agent is not saved; {self._newest()}"

    def _newest(self) -> str:
        ckpts = list_checkpoints(self.run_dir) if self.run_dir is not None else []
        if not ckpts:
            return "no checkpoint of this run is on disk"
        step = checkpoint_step(ckpts[-1]) or 0
        return f"the newest checkpoint, {ckpts[-1].name} ({step:,} env steps), is kept"
