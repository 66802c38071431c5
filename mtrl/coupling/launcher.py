"""A tiny launcher that ties a simulation's whole process tree to the process that started it.

Run as a script (standard library only, so it starts in milliseconds)::

    python launcher.py PARENT_PID GRACE_S [--log-max-bytes N] -- command args...

It makes itself a child subreaper (every descendant that loses its parent, such as MPI ranks
whose ``mpiexec`` died, is re-parented to it), asks the kernel for SIGTERM when its parent dies
(``PR_SET_PDEATHSIG``; it also polls ``getppid`` in case the parent died first), and runs the
command in its own process group. It ends when the command ends, when its parent dies, or on
SIGTERM/SIGINT/SIGHUP; in every case it then SIGTERMs every descendant (found through /proc, so
ranks that started sessions of their own are caught too), waits ``GRACE_S``, and SIGKILLs what
is left. Its exit status is the command's (128 + signal when the command was killed); 127 when
the command was not found, 126 when it is not executable (as a shell says).

With ``--log-max-bytes N`` the command's stdout and stderr go through a pipe that it copies to
its own stdout (the log file, opened for appending), keeping that file under ``N`` bytes: past
it, the older half is dropped and a line says so (the end of a log is what explains a crash).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, arg: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, arg, 0, 0, 0)


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (Linux /proc), children first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def shutdown(grace_s: float) -> None:
    """SIGTERM every descendant, then SIGKILL what is left after ``grace_s``."""
    me = os.getpid()
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        for pid in descendants(me):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap()
            if not descendants(me):
                return
            time.sleep(0.02)


def copy_capped(src: int, dst: int, cap: int) -> None:
    """Copy ``src`` to ``dst`` (a file opened for appending) until end of file, keeping the
    file under about ``cap`` bytes: past it, only its newer half is kept."""
    size = os.fstat(dst).st_size
    while True:
        try:
            data = os.read(src, 1 << 16)
        except OSError:
            return
        if not data:
            return
        with contextlib.suppress(OSError):  # a full disk: the pipe is still drained
            os.write(dst, data)
            size += len(data)
            if size > cap:
                size = _keep_newer_half(dst, size, cap)


def _keep_newer_half(fd: int, size: int, cap: int) -> int:
    """Cut the file open on ``fd`` (for appending) to a note and its last ``cap // 2``
    bytes; returns its new size."""
    reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)  # fd itself may be write-only
    try:
        keep = os.pread(reader, cap // 2, size - cap // 2)
    finally:
        os.close(reader)
    note = f"[mtrl: older output dropped; this log keeps its last ~{cap} bytes]\n".encode()
    os.ftruncate(fd, 0)
    os.write(fd, note + keep)
    return len(note) + len(keep)


def start(command: list[str], log_max_bytes: int | None) -> tuple[subprocess.Popen, Any]:
    """Start ``command`` (its output copied under a cap when ``log_max_bytes`` is given);
    returns it and the copying thread (or None)."""
    if log_max_bytes is None:
        return subprocess.Popen(command), None
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert child.stdout is not None
    src = child.stdout.fileno()
    copier = threading.Thread(target=copy_capped, args=(src, 1, log_max_bytes), daemon=True)
    copier.start()
    return child, copier


def wait_for(child: subprocess.Popen, parent: int, stop: dict[str, int]) -> int | None:
    """The command's exit status once it ends, or None when a signal asked us to stop or our
    parent is gone first. Asleep in between: the kernel wakes us when the command ends
    (``pidfd_open``) or a signal arrives (the wakeup fd), and once a second to check the parent
    (should ``PR_SET_PDEATHSIG`` not reach us). A thousand launchers on one machine must cost
    nothing while their codes run; polling ``wait`` with a timeout woke each ~80 times a second
    and, at a thousand members, took the CPU their codes and heartbeats needed."""
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel or platform): poll instead
        while not stop["sig"] and os.getppid() == parent:
            with contextlib.suppress(subprocess.TimeoutExpired):
                return child.wait(timeout=0.1)
        return None
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    previous = signal.set_wakeup_fd(wake_w)
    try:
        while not stop["sig"] and os.getppid() == parent:
            ready, _, _ = select.select([pidfd, wake_r], [], [], 1.0)
            if wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 512)
            code = child.poll()
            if code is not None:
                return code
        return None
    finally:
        signal.set_wakeup_fd(previous)
        for fd in (pidfd, wake_r, wake_w):
            os.close(fd)


def main(argv: list[str]) -> int:
    parent, grace = int(argv[0]), float(argv[1])
    options = argv[2 : argv.index("--")]
    cap = int(options[options.index("--log-max-bytes") + 1]) if options else None
    command = argv[argv.index("--") + 1 :]
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    stop = {"sig": 0}

    def on_signal(sig: int, _frame: object) -> None:
        stop["sig"] = sig

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    if os.getppid() != parent:
        return 1
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # our own group (the env also starts us in a new session)
    try:
        child, copier = start(command, cap)
    except OSError as e:
        print(f"mtrl launcher: cannot start {command[0]!r}: {e}", file=sys.stderr)
        return 126 if isinstance(e, PermissionError) else 127
    code = wait_for(child, parent, stop)
    shutdown(grace if code is None else min(grace, 0.5))
    if copier is not None:
        copier.join(timeout=2.0)  # the last lines (a crash's message) reach the log first
    if code is None:
        code = child.poll()
    if code is None:
        return 128 + (stop["sig"] or signal.SIGKILL)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
