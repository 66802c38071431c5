"""CPU that idle launchers take while their codes run: this checkout's launcher against an
older commit's, side by side.

Every launched simulation process runs under :mod:`mtrl.coupling.launcher`, so an ensemble of
N members has N launchers. While their codes step, the launchers should cost nothing. This
starts ``--launchers`` launchers whose command sleeps, measures the CPU time they take over
``--window`` seconds (utime + stime from /proc), stops them, and does the same with the
launcher of ``--old`` (read from git); ``--rounds`` times, taking turns.

Usage: ``python benchmarks/launcher_idle.py --old REV [--launchers 200] [--window 10]
[--rounds 2] [--results-dir DIR]``; writes ``launcher_idle.json`` in ``docs/results`` or DIR.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = "mtrl/coupling/launcher.py"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU seconds the processes took so far (the gone ones count 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def idle_share(launcher: Path, count: int, window: float) -> float:
    """CPU cores ``count`` launchers of sleeping commands take, measured over ``window``."""
    me = str(os.getpid())
    cmd = [sys.executable, "-I", str(launcher), me, "1.0", "--", "sleep", "3600"]
    procs = [subprocess.Popen(cmd) for _ in range(count)]
    try:
        time.sleep(3.0)  # past their start-up
        pids = [p.pid for p in procs]
        c0, t0 = cpu_seconds(pids), time.monotonic()
        time.sleep(window)
        return (cpu_seconds(pids) - c0) / (time.monotonic() - t0)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=60)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--old", required=True, help="the commit whose launcher is compared")
    p.add_argument("--launchers", type=int, default=200)
    p.add_argument("--window", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--results-dir", type=Path)
    args = p.parse_args()
    show = ["git", "-C", str(ROOT), "show", f"{args.old}:{LAUNCHER}"]
    old_text = subprocess.run(show, capture_output=True, text=True, check=True).stdout
    new_rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    shares: dict[str, list[float]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "launcher.py"
        old.write_text(old_text)
        for r in range(args.rounds):
            for side, path in (("old", old), ("new", ROOT / LAUNCHER)):
                share = idle_share(path, args.launchers, args.window)
                shares[side].append(share)
                print(f"round {r} {side}: {args.launchers} idle launchers took {share:.3f} "
                      "CPU cores", flush=True)  # fmt: skip
    result = {
        "machine": machine(),
        "old": args.old,
        "new": new_rev,
        "launchers": args.launchers,
        "window_s": args.window,
        "cores": shares,
    }
    print(f"wrote {write_result('launcher_idle', result, args.results_dir)}")


if __name__ == "__main__":
    main()
