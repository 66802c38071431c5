"""Named numpy arrays in one shared-memory file, opened by path from any process.

The learner process creates an :class:`Arena` per actor (its unroll slots); the actor process
attaches to it from the picklable :class:`ArenaLayout`. Both sides then read and write the same
pages: an unroll travels from actor to learner without pickling or copying arrays.

Backed by a file in ``/dev/shm`` (a tmpfs; the temp dir elsewhere) mapped with ``mmap``, rather
than :class:`multiprocessing.shared_memory.SharedMemory`, whose resource tracker in Python 3.11
unlinks segments when an attaching child exits. The creator owns the file and unlinks it.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_ALIGN = 64  # cache line: keeps every array aligned for vectorised copies


def _shm_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else ""


@dataclass(frozen=True)
class ArraySpec:
    offset: int
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class ArenaLayout:
    """Where every named array lives in the file; small and picklable."""

    path: str
    size: int
    arrays: dict[str, ArraySpec]


def plan_layout(path: str, fields: Mapping[str, tuple[tuple[int, ...], np.dtype]]) -> ArenaLayout:
    """Byte offsets for ``fields`` (name → (shape, dtype)), each aligned to 64 bytes."""
    offset, arrays = 0, {}
    for name, (shape, dtype) in fields.items():
        dt = np.dtype(dtype)
        arrays[name] = ArraySpec(offset, tuple(int(s) for s in shape), dt.str)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        offset += -(-max(nbytes, 1) // _ALIGN) * _ALIGN
    return ArenaLayout(path, max(offset, _ALIGN), arrays)


class Arena:
    """A mapped shared-memory file and numpy views of its named arrays."""

    def __init__(self, layout: ArenaLayout, *, owner: bool) -> None:
        self.layout = layout
        self.owner = owner
        fd = os.open(layout.path, os.O_RDWR)
        try:
            self._mmap = mmap.mmap(fd, layout.size)
        finally:
            os.close(fd)
        self.arrays: dict[str, np.ndarray] = {
            name: np.ndarray(spec.shape, np.dtype(spec.dtype), self._mmap, spec.offset)
            for name, spec in layout.arrays.items()
        }

    @classmethod
    def create(
        cls, fields: Mapping[str, tuple[tuple[int, ...], np.dtype]], prefix: str = "mtrl-"
    ) -> Arena:
        """Create a zero-filled file sized for ``fields``; this process owns (unlinks) it."""
        fd, path = tempfile.mkstemp(prefix=prefix, dir=_shm_dir() or None)
        layout = plan_layout(path, fields)
        try:
            os.ftruncate(fd, layout.size)
        finally:
            os.close(fd)
        return cls(layout, owner=True)

    @classmethod
    def attach(cls, layout: ArenaLayout) -> Arena:
        """Map an existing arena (in another process or thread)."""
        return cls(layout, owner=False)

    def close(self) -> None:
        """Drop the views and the mapping; the owner also deletes the file."""
        self.arrays = {}
        # A view still alive somewhere keeps the mapping; it goes with that view.
        with contextlib.suppress(BufferError):
            self._mmap.close()
        if self.owner:
            Path(self.layout.path).unlink(missing_ok=True)
            self.owner = False
