"""Announcement files: how a simulation that joins a run late tells mtrl where it listens.

In attach mode the simulation binds and mtrl connects, so mtrl must learn the address of a code
that starts during a run. A code that joins writes one small file into a directory both sides
know (``members_dir``; on a cluster, a shared file system): ``<name>.addr``, holding the address
it bound. mtrl scans the directory, *claims* a file by creating ``<name>.claim`` exclusively
(so that two actors never attach to one code; a claim whose process on this machine is gone,
an actor killed before it released it, is taken back), and connects. A code that leaves
cleanly removes its ``.addr`` file before it closes its socket: mtrl, seeing the connection
drop with the file gone, counts a goodbye; with the file still there, the code vanished
(killed, preempted, lost).

Standard library only: the Python client (:mod:`mtrl.coupling.client`) imports it too.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from pathlib import Path

SUFFIX, CLAIM = ".addr", ".claim"


def reachable(endpoint: str) -> str:
    """``endpoint`` as another machine reaches it: one bound on every interface (``0.0.0.0``,
    ``[::]``) under this machine's host name."""
    for anywhere in ("://0.0.0.0:", "://[::]:"):
        if anywhere in endpoint:
            return endpoint.replace(anywhere, f"://{socket.getfqdn()}:")
    return endpoint


def announce(directory: str | os.PathLike, address: str, name: str | None = None) -> Path:
    """Write ``<directory>/<name>.addr`` holding ``address`` (atomically: a reader never sees
    half a file); returns its path. ``name`` defaults to a fresh unique one."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name or uuid.uuid4().hex}{SUFFIX}"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(address + "\n")
    os.replace(tmp, path)
    return path


def withdraw(path: str | os.PathLike) -> None:
    """Remove an announcement (the code says goodbye); missing is fine."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _owner() -> str:
    """Who claims: this machine and process."""
    return f"{socket.gethostname()} {os.getpid()}"


def _stale(mark: Path) -> bool:
    """Whether claim ``mark`` was left by a process of this machine that is gone (an actor
    killed before it could release its claims); removes it then."""
    try:
        text = mark.read_text()
        host, pid = text.split()
        if host != socket.gethostname():
            return False  # another machine's: its process cannot be checked from here
        os.kill(int(pid), 0)
        return False
    except ProcessLookupError:
        if mark.read_text() == text:  # not claimed anew meanwhile
            withdraw(mark)
        return True
    except (OSError, ValueError):  # unreadable, half-written, or alive (PermissionError)
        return False


def unclaimed(directory: str | os.PathLike) -> list[Path]:
    """The announcements in ``directory`` nobody claimed yet (or whose claimer on this
    machine is gone), oldest first."""
    folder = Path(directory)
    try:
        entries = [e for e in os.scandir(folder) if e.name.endswith(SUFFIX) and e.is_file()]
    except FileNotFoundError:
        return []
    names = {e.name for e in os.scandir(folder)}
    free = [
        e
        for e in entries
        if (mark := e.name.removesuffix(SUFFIX) + CLAIM) not in names or _stale(folder / mark)
    ]
    return [Path(e.path) for e in sorted(free, key=lambda e: (e.stat().st_mtime, e.name))]


def claim(path: Path) -> str | None:
    """Claim announcement ``path`` for this process: its address, or None when another claimed
    it first or it is gone."""
    mark = path.with_name(path.name.removesuffix(SUFFIX) + CLAIM)
    try:
        fd = os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return None
    with os.fdopen(fd, "w") as f:
        f.write(_owner())
    try:
        address = path.read_text().strip()
    except FileNotFoundError:
        release(path)
        return None
    return address or None


def present(path: Path) -> bool:
    """Whether the code of announcement ``path`` still announces itself (no goodbye)."""
    return path.exists()


def release(path: Path, *, forget: bool = False) -> None:
    """Drop this process's claim on ``path``; ``forget`` also removes the announcement (a code
    that vanished: nobody should attach to its address again)."""
    withdraw(path.with_name(path.name.removesuffix(SUFFIX) + CLAIM))
    if forget:
        withdraw(path)
