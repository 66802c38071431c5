"""Checkpoint storage: atomic, durable writes, keep-last-N, and safe loading with fallback.

Layout: ``{run_dir}/checkpoints/ckpt_{step:012d}.pt``. A checkpoint is a ``torch.save`` of a
dict of plain data only — tensors, numbers, strings, ``None``, lists, tuples and dicts — so
that it loads with ``torch.load(weights_only=True)``, which never runs code from the file.

Durability: the bytes go to a temp file in the same directory, are flushed and fsynced, the
file is renamed over its final name (``os.replace`` is atomic on POSIX and Windows) and the
directory is fsynced so the rename itself survives a crash. Only then are old checkpoints
pruned. A reader therefore sees complete checkpoints or none; a process killed mid-write
leaves at most a stray temp file, removed by the next save. A disk that fails the write (full,
read-only, the run directory removed) raises :class:`CheckpointWriteError` once the temp file
is gone: a partial file never replaces a good one, and no older checkpoint is pruned.

What goes *into* the state (model, optimiser, PopArt, scheduler, counters, RNG, config) is the
trainer's business; :func:`capture_rng_state` and :func:`restore_rng_state` cover the RNGs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import random
import re
import tempfile
import warnings
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtrl.disk_faults import describe, disk_fault
from mtrl.errors import CheckpointError

CHECKPOINT_DIR = "checkpoints"
_NAME = re.compile(r"^ckpt_(\d+)\.pt$")
_TMP_PREFIX = ".ckpt_"
_LEAVES = (type(None), bool, int, float, str, bytes, torch.Tensor, torch.dtype, torch.device)


class CheckpointWarning(UserWarning):
    """A checkpoint was skipped (truncated or corrupt) and an older one used instead."""


class CorruptCheckpointError(CheckpointError):
    """The file is truncated, damaged or not a checkpoint at all."""


class CheckpointWriteError(CheckpointError):
    """The disk failed a checkpoint's write: full, read-only, or the run directory removed.

    Nothing was replaced: the checkpoints already written are as they were.
    """

    def __init__(self, step: int, where: Path, fault: OSError) -> None:
        self.step, self.where, self.fault = step, where, fault
        self.reason = describe(fault)
        super().__init__(f"checkpoint at {step:,} env steps not written to {where}: {self.reason}")


class NoCheckpointError(CheckpointError):
    """A run directory holds no checkpoint file at all."""


class UnsafeCheckpointError(CheckpointError):
    """The file holds pickled code or custom objects, which ``weights_only`` loading refuses."""


def checkpoint_dir(run_dir: Path | str) -> Path:
    """The directory holding a run's checkpoints."""
    return Path(run_dir) / CHECKPOINT_DIR


def checkpoint_path(run_dir: Path | str, step: int) -> Path:
    """Where the checkpoint of ``step`` lives."""
    return checkpoint_dir(run_dir) / f"ckpt_{step:012d}.pt"


def checkpoint_step(path: Path | str) -> int | None:
    """The step encoded in a checkpoint's file name, or None if it is not one."""
    m = _NAME.match(Path(path).name)
    return int(m.group(1)) if m else None


def list_checkpoints(run_dir: Path | str) -> list[Path]:
    """A run's checkpoint files, oldest step first (temp files are not listed)."""
    d = checkpoint_dir(run_dir)
    if not d.is_dir():
        return []
    found = [(checkpoint_step(p), p) for p in d.iterdir()]
    return [p for step, p in sorted((s, p) for s, p in found if s is not None)]


def check_plain(obj: Any, where: str = "state") -> None:
    """Raise :class:`CheckpointError` naming the first value that is not plain data.

    Run before writing so a checkpoint that ``weights_only`` loading would refuse is never
    written in the first place.
    """
    if isinstance(obj, _LEAVES):
        return
    if isinstance(obj, dict | OrderedDict):
        for k, v in obj.items():
            if not isinstance(k, str | int):
                raise CheckpointError(
                    f"{where}: dict key {k!r} of type {type(k).__name__} cannot be checkpointed; "
                    "use str or int keys"
                )
            check_plain(v, f"{where}[{k!r}]")
        return
    if isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            check_plain(v, f"{where}[{i}]")
        return
    hint = " (use .tolist() or torch.as_tensor)" if isinstance(obj, np.ndarray | np.generic) else ""
    raise CheckpointError(
        f"{where}: a {type(obj).__module__}.{type(obj).__qualname__} cannot be checkpointed{hint}; "
        "a checkpoint holds only tensors, numbers, strings, None, lists, tuples and dicts"
    )


def _fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # Windows: directories cannot be opened; rename is durable enough there
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(
    run_dir: Path | str,
    state: dict[str, Any],
    step: int,
    keep_last: int,
    *,
    create: bool = True,
) -> Path:
    """Write ``state`` atomically as the checkpoint of ``step``; keep the newest ``keep_last``.

    Returns the checkpoint's path. Raises :class:`CheckpointError` if ``state`` holds anything
    but plain data (nothing is written then), and :class:`CheckpointWriteError` when the disk
    fails the write (full, read-only, removed: :mod:`mtrl.disk_faults`): the temp file is
    removed and every checkpoint already written is left as it was. ``create=False``: the run
    directory must exist (a trainer's, made when the run began), so a run directory removed
    under a run is reported rather than silently made again.
    """
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if keep_last < 1:
        raise ValueError(f"keep_last must be >= 1, got {keep_last}")
    check_plain(state)
    directory = checkpoint_dir(run_dir)
    final = checkpoint_path(run_dir, step)
    tmp: Path | None = None
    try:
        if not create and not Path(run_dir).is_dir():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(run_dir))
        directory.mkdir(parents=create, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=".tmp", dir=directory)
        tmp = Path(tmp_name)
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        _fsync_dir(directory)
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(OSError):  # a removed directory has no temp file left
                tmp.unlink(missing_ok=True)
        fault = disk_fault(e) if isinstance(e, Exception) else None
        if fault is None:
            raise
        where = Path(run_dir) if fault.errno == errno.ENOENT else directory
        raise CheckpointWriteError(step, where, fault) from e
    _prune(directory, keep_last, keep=final, own_tmp=tmp)
    return final


def _prune(directory: Path, keep_last: int, keep: Path, own_tmp: Path) -> None:
    """Delete all but the newest ``keep_last`` checkpoints and stray temp files of dead saves."""
    ckpts = list_checkpoints(directory.parent)
    for old in ckpts[: max(len(ckpts) - keep_last, 0)]:
        if old != keep:
            old.unlink(missing_ok=True)
    for stray in directory.glob(f"{_TMP_PREFIX}*.tmp"):
        if stray != own_tmp:
            stray.unlink(missing_ok=True)


def load_checkpoint(path: Path | str, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load one checkpoint with ``weights_only=True``; every failure is a CheckpointError.

    The zip members' CRCs are verified first, so a flipped byte is caught too, not only a
    truncated file. :class:`UnsafeCheckpointError` means the file carries pickled code.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
        if bad is not None:
            raise CorruptCheckpointError(f"{path}: corrupt checkpoint (bad checksum in {bad})")
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        if "Unsupported global" in str(e) or "Weights only load failed" in str(e):
            raise UnsafeCheckpointError(
                f"{path}: refused to load: the checkpoint carries pickled code or objects "
                f"({_unsupported_global(e)}); mtrl loads checkpoints with weights_only=True and "
                "only accepts tensors, numbers, strings, lists and dicts"
            ) from None
        raise CorruptCheckpointError(f"{path}: corrupt checkpoint ({_first_line(e)})") from None
    except CheckpointError:
        raise
    except (OSError, RuntimeError, EOFError, ValueError, zipfile.BadZipFile) as e:
        raise CorruptCheckpointError(
            f"{path}: truncated or corrupt checkpoint ({_first_line(e)})"
        ) from None
    if not isinstance(state, dict):
        raise CorruptCheckpointError(
            f"{path}: not an mtrl checkpoint (holds a {type(state).__name__}, not a dict)"
        )
    return state


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _unsupported_global(e: BaseException) -> str:
    m = re.search(r"GLOBAL ([\w.]+)", str(e))
    return f"found {m.group(1)}" if m else _first_line(e)


def load_latest(
    run_dir: Path | str, map_location: str | torch.device = "cpu"
) -> tuple[dict[str, Any], Path]:
    """The newest checkpoint that loads, and its path.

    A truncated or corrupt newest checkpoint is reported with a :class:`CheckpointWarning` and
    the previous one tried. A checkpoint carrying pickled code is refused outright (no
    fallback: that is tampering, not a crash). No loadable checkpoint: :class:`CheckpointError`.
    """
    ckpts = list_checkpoints(run_dir)
    if not ckpts:
        raise NoCheckpointError(
            f"{checkpoint_dir(run_dir)}: no checkpoints (files named ckpt_<step>.pt)"
        )
    failures: list[str] = []
    for path in reversed(ckpts):
        try:
            state = load_checkpoint(path, map_location)
        except CorruptCheckpointError as e:
            failures.append(str(e))
            warnings.warn(f"skipping {e}; trying the previous one", CheckpointWarning, stacklevel=2)
            continue
        return state, path
    raise CheckpointError(f"{checkpoint_dir(run_dir)}: no loadable checkpoint", problems=failures)


def capture_rng_state() -> dict[str, Any]:
    """Python, numpy (global) and torch (CPU and CUDA) RNG states as plain data."""
    version, internal, gauss = random.getstate()
    np_state = np.random.get_state(legacy=False)
    np_state = {**np_state, "state": {**np_state["state"]}}
    np_state["state"]["key"] = np_state["state"]["key"].tolist()
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": np_state,
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`capture_rng_state` returned (CUDA only when both sides have it)."""
    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(x) for x in internal), gauss))
    np_state = {**state["numpy"], "state": {**state["numpy"]["state"]}}
    np_state["state"]["key"] = np.asarray(np_state["state"]["key"], dtype=np.uint32)
    np.random.set_state(np_state)
    torch.set_rng_state(torch.as_tensor(state["torch"], dtype=torch.uint8).cpu())
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(list(state["torch_cuda"]))
