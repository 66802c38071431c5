"""Real disk faults for tests: a tmpfs of a few MB mounted for one test and filled up, or a
directory made read-only under a writer by a read-only bind mount.

Mounting needs root (or CAP_SYS_ADMIN); where it fails the test is skipped with the reason.
"""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(path: Path, size: str = "6m") -> Iterator[Path]:
    """Mount a tmpfs of ``size`` at ``path`` for the ``with`` block (skip where we cannot)."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(fs: Path) -> Path:
    """Fill ``fs`` to the last byte with one file; its path (delete it to free the room)."""
    filler = fs / "filler.bin"
    chunk = b"\0" * (64 << 10)
    with filler.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    with filler.open("ab", buffering=0) as f:  # the last partial chunk, byte by byte
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass
    return filler


@contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """Make the directory ``path`` read-only for the ``with`` block: a read-only bind mount
    over it (files already open for writing keep writing underneath; new files, renames and
    removals fail with EROFS, as on a filesystem remounted read-only). Root only: a chmod
    would not stop root."""
    bind = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True, text=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here (needs root): {bind.stderr.strip()}")
    try:
        subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(path)], check=True, capture_output=True
        )
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
