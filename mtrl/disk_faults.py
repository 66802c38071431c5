"""Faults of the disk under a run directory, told apart from bugs and said in a few words.

A full disk, a quota, a read-only mount, a directory removed under a running process or a
failing device raise :class:`OSError` with an ``errno`` that says which. Writers of run files
(checkpoints, metric sinks, the run directory itself) ask :func:`disk_fault` whether an
exception is one of those, to report it in one line instead of a traceback. ``torch.save``
wraps the ``OSError`` of a failed write in a ``RuntimeError``; the exception's chain is
searched for it.
"""

from __future__ import annotations

import errno

#: errno → the fault in words, for the faults of the storage rather than of the program.
DISK_FAULTS: dict[int, str] = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOENT: "the directory no longer exists (removed during the run?)",
    errno.ESTALE: "stale file handle (the directory was removed on the file server)",
    errno.EIO: "input/output error (a failing disk?)",
}


def disk_fault(exc: BaseException | None) -> OSError | None:
    """The :class:`OSError` of a storage fault in ``exc`` or its causes and contexts, if any."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FAULTS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def describe(exc: OSError) -> str:
    """``exc`` in a few words: ``no space left on device (errno 28)``."""
    words = DISK_FAULTS.get(exc.errno or 0) or exc.strerror or type(exc).__name__
    return f"{words} (errno {exc.errno})" if exc.errno else words
