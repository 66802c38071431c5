"""The launcher sleeps while its command runs: it wakes when the command ends, on a signal, or
once a second to check its parent, never in a polling loop (a thousand members' launchers on
one machine took the CPU their codes needed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mtrl.coupling.launcher as launcher_module

LAUNCHER = Path(launcher_module.__file__)


def _switches(pid: int) -> int:
    """The process's voluntary context switches (each a wake-up from a wait) so far."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc status")


def _launch(*command: str) -> subprocess.Popen:
    cmd = [sys.executable, "-I", str(LAUNCHER), str(os.getpid()), "1.0", "--", *command]
    return subprocess.Popen(cmd)


def _wait_for_child(proc: subprocess.Popen) -> None:
    """Until the launcher has started its command (its child appears in /proc)."""
    deadline = time.monotonic() + 60
    while not launcher_module.descendants(proc.pid):
        assert time.monotonic() < deadline, "the launcher never started its command"
        time.sleep(0.05)


def test_an_idle_launcher_wakes_about_once_a_second() -> None:
    proc = _launch("sleep", "600")
    try:
        _wait_for_child(proc)
        time.sleep(0.5)  # past the start-up's own switches
        before, t0 = _switches(proc.pid), time.monotonic()
        time.sleep(3.0)
        woke, spent = _switches(proc.pid) - before, time.monotonic() - t0
        # once a second for the parent check, a few for the interpreter's own threads; the
        # polling wait it replaced woke ~80 times a second (240 here)
        assert woke <= 4 * spent + 4, f"{woke} wake-ups in {spent:.1f} s"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_it_returns_at_once_when_its_command_ends_or_a_signal_comes() -> None:
    t0 = time.monotonic()
    proc = _launch("sh", "-c", "sleep 0.3; exit 7")
    assert proc.wait(timeout=30) == 7
    assert time.monotonic() - t0 < 0.9 + 5.0  # not the 1 s check's beat, beyond start-up
    proc = _launch("sleep", "600")
    _wait_for_child(proc)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert not launcher_module.descendants(proc.pid)
    assert time.monotonic() - t0 < 1.0 + 1.0 + 2.0  # the grace (1 s) and no second's wait
