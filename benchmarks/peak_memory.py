"""Peak memory of a training run: the trainer process plus all its actor children.

    .venv/bin/python benchmarks/peak_memory.py     # writes docs/results/peak_memory.json

Runs ``mtrl train configs/quickstart.yaml`` (its default actor mode) as a child process in a
temporary directory and samples, every ``--interval`` seconds, the process tree under it:

* **RSS sum**: resident set sizes added over the processes (what ``ps``/``top`` show). Pages
  shared between processes (torch's libraries, the shared-memory unroll slots) are counted once
  per process, so this over-counts: it is the upper bound the target is checked against;
* **PSS sum**: proportional set sizes (``/proc/<pid>/smaps_rollup``; each shared page split
  among its sharers), which add up to the tree's real footprint.

Uses psutil when it is installed, else reads ``/proc`` directly (Linux). Target: peak < 3 GiB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

ROOT = Path(__file__).resolve().parent.parent
GIB = 1024**3
TARGET_GIB = 3.0

try:
    import psutil
except ImportError:  # the /proc fallback below
    psutil = None


def _children_proc() -> dict[int, list[int]]:
    """Parent pid → child pids, from ``/proc/<pid>/stat``."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants that exist now."""
    if psutil is not None:
        try:
            root = psutil.Process(pid)
            return [pid] + [c.pid for c in root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
    kids, out, todo = _children_proc(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _kib_field(path: str, name: str) -> int | None:
    """Value in bytes of a ``Name:   123 kB`` line of a /proc file, or None."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def describe(pid: int) -> str:
    """A short label of a process: the trainer, an actor worker, or its command line."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"
    if "mtrl train" in cmd or cmd.endswith(("quickstart.yaml", ".yaml")):
        return "trainer"
    if "resource_tracker" in cmd:
        return "multiprocessing resource tracker"
    if "forkserver" in cmd:
        return "forkserver"
    if "spawn_main" in cmd:
        return "actor worker (spawned)"
    return " ".join(cmd.split())[:80]


def memory(pid: int) -> tuple[int, int] | None:
    """(RSS, PSS) in bytes of one process, or None if it is gone."""
    if psutil is not None:
        try:
            full = psutil.Process(pid).memory_full_info()
            return full.rss, getattr(full, "pss", full.rss)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
    rss = _kib_field(f"/proc/{pid}/status", "VmRSS")
    pss = _kib_field(f"/proc/{pid}/smaps_rollup", "Pss")
    if rss is None:
        return None
    return rss, pss if pss is not None else rss


def measure(cmd: list[str], interval: float, cwd: str) -> dict[str, Any]:
    """Run ``cmd`` and sample its process tree until it exits."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peak_rss = peak_pss = peak_procs = samples = 0
    peak_at = 0.0
    per_process_peak: dict[int, int] = {}
    names: dict[int, str] = {}
    timeline: list[tuple[float, float, float]] = []  # (s, RSS sum GiB, PSS sum GiB)
    next_mark = 0.0
    while proc.poll() is None:
        rss_sum = pss_sum = n = 0
        for pid in tree(proc.pid):
            m = memory(pid)
            if m is None:
                continue
            rss_sum, pss_sum, n = rss_sum + m[0], pss_sum + m[1], n + 1
            per_process_peak[pid] = max(per_process_peak.get(pid, 0), m[0])
            if pid not in names:
                names[pid] = describe(pid)
        samples += 1
        if rss_sum > peak_rss:
            peak_rss, peak_at = rss_sum, time.perf_counter() - t0
        peak_pss = max(peak_pss, pss_sum)
        peak_procs = max(peak_procs, n)
        now = time.perf_counter() - t0
        if now >= next_mark and n:
            timeline.append((round(now, 1), rss_sum / GIB, pss_sum / GIB))
            next_mark = now + 5.0
        time.sleep(interval)
    out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-4000:]}")
    biggest = sorted(per_process_peak.values(), reverse=True)
    processes = [
        {"pid": pid, "role": names.get(pid, "?"), "peak_rss_gib": rss / GIB}
        for pid, rss in sorted(per_process_peak.items(), key=lambda kv: -kv[1])
    ]
    return {
        "peak_rss_sum_gib": peak_rss / GIB,
        "peak_pss_sum_gib": peak_pss / GIB,
        "peak_at_s": peak_at,
        "max_processes": peak_procs,
        "largest_process_peak_rss_gib": biggest[0] / GIB if biggest else None,
        "processes": processes,
        "samples": samples,
        "timeline_s_rss_pss_gib": timeline,
        "wall_s": wall,
        "output_tail": out.strip().splitlines()[-12:],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "configs" / "quickstart.yaml"))
    ap.add_argument("--total-env-steps", type=int, help="override the config's budget")
    ap.add_argument("--interval", type=float, default=0.25, help="seconds between samples")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    mtrl = str(Path(sys.executable).with_name("mtrl"))
    cmd = [mtrl, "train", str(Path(args.config).resolve())]
    if args.total_env_steps:
        cmd += ["--total-env-steps", str(args.total_env_steps)]
    info = machine()
    with tempfile.TemporaryDirectory() as tmp:  # the run directory goes here, not in runs/
        res = measure(cmd, args.interval, tmp)
    payload = {
        "machine": info,
        "command": "mtrl train " + " ".join(cmd[2:]).replace(str(ROOT) + "/", ""),
        "sampler": "psutil" if psutil is not None else "/proc",
        "interval_s": args.interval,
        **res,
        "target_gib": TARGET_GIB,
        "target_met": res["peak_rss_sum_gib"] < TARGET_GIB,
        "load_avg_1min_at_end": os.getloadavg()[0],
    }
    print("\n".join(res["output_tail"]))
    print(
        f"peak RSS sum {res['peak_rss_sum_gib']:.2f} GiB, PSS sum {res['peak_pss_sum_gib']:.2f} "
        f"GiB over {res['max_processes']} processes (target < {TARGET_GIB} GiB: "
        f"{'met' if payload['target_met'] else 'NOT met'})"
    )
    if not args.no_write:
        print(f"wrote {write_result('peak_memory', payload)}")


if __name__ == "__main__":
    main()
