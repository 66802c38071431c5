"""Soak: a long run with faults injected into every task and a resume every few minutes.

One process trains ``chaos/wrap`` tasks (CartPole under raise / NaN / kill -9 / hang faults,
every env instance faulty once it has stepped far enough), stops with a checkpoint every
``--segment-minutes`` and resumes the run in the same process, for ``--minutes`` in all.
After each segment it counts what the run left behind once its trainer is closed: this
process's resident memory, open file descriptors, threads, child processes and ``/dev/shm``
segments it maps; during each segment it samples the resident memory of this process and its actors.

Checks, as ratios and counts (no absolute speed):

* resident memory after warm-up (the end of the first segment) grows by at most 10 % to the
  end of the last one (the learner process; the actors' sum is reported beside it);
* file descriptors, threads, children and shared-memory segments after each close equal
  those after the first (no leak across resumes);
* every fault counted: per task and segment, the env instances the chaos plugin made faulty
  (its marker files) minus the faults of the injected kind the pool counted lies in
  ``[0, actors of the task + 1]`` (instances alive at the stop, and the copy the trainer builds
  to read the spaces, never reach their fault), and no fault of another kind is counted;
* no episode lost or doubled across resumes: ``episodes.csv`` has exactly as many rows per task
  as the run counted episodes.

    python benchmarks/soak.py --minutes 30 --segment-minutes 3

Writes docs/results/soak.json.
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import machine, write_result

from mtrl.config import parse_config
from mtrl.train.trainer import Trainer

#: Each task's fault: the chaos kwargs, and the kind the pool counts it as.
FAULTS = {
    "raises": ("raise_after: 300", "raise"),
    "nans": ("nan_after: 400", "nan"),
    "killed": ("kill_after: 350", "exit"),
    "hangs": ("hang_after: 500, hang_s: 60", "hang"),
}
ACTORS_PER_TASK = 1
#: Env instances a segment makes that never reach their fault: the actors alive at the stop,
#: and the one copy the trainer builds to read the spaces of a task with ``env_kwargs``.
UNFAULTED_SLACK = ACTORS_PER_TASK + 1
MEMORY_GROWTH_LIMIT = 1.10


def config(markers: Path, runs: Path) -> str:
    tasks = "".join(
        f"""
  - env: chaos/wrap
    name: {name}
    num_envs: 8
    env_kwargs: {{env: gymnasium/CartPole-v1, {kwargs}, faulty_instances: 1000000000,
                 marker_dir: {markers / name}}}"""
        for name, (kwargs, _) in FAULTS.items()
    )
    return f"""
name: soak
total_env_steps: 10000000000
tasks:{tasks}
actors: {{mode: process, start_method: forkserver}}
scheduler: {{policy: fixed, num_actors: {ACTORS_PER_TASK * len(FAULTS)}, step_timeout_s: 3,
            max_restarts: 1000}}
learner: {{unroll_length: 20, batch_size: 16, model: {{encoder_dim: 32, torso: [64]}}}}
checkpoint: {{every_s: 60, keep_last: 2}}
tracking: {{run_dir: {runs}, console: quiet, log_every_s: 5, wandb: {{mode: disabled}},
           final_eval_episodes: 0}}
"""


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    """Every descendant process of ``pid``."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        frontier += kids
    return out


def leftovers() -> dict[str, int]:
    """What this process holds with no trainer open."""
    me = os.getpid()
    return {
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": len(os.listdir("/proc/self/task")),
        "children": len(children(me)),
        "shm_segments": len(
            {
                ln.split()[-1]
                for ln in Path("/proc/self/maps").read_text().splitlines()
                if "/dev/shm/" in ln
            }
        ),
    }


def markers_per_task(markers: Path) -> dict[str, int]:
    return {n: len(list((markers / n).glob("*"))) if (markers / n).exists() else 0 for n in FAULTS}


class Sampler(threading.Thread):
    """Resident memory of this process and of its descendants, every ``every_s``."""

    def __init__(self, every_s: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.every_s, self.samples = every_s, []
        self._done = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self._done.wait(self.every_s):
            self.samples.append((rss_kb(me), sum(rss_kb(c) for c in children(me))))

    def stop(self) -> list[tuple[int, int]]:
        self._done.set()
        self.join()
        return self.samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--segment-minutes", type=float, default=3.0)
    ap.add_argument("--name", default="soak")
    args = ap.parse_args()
    os.environ.setdefault("WANDB_MODE", "offline")
    work = Path(tempfile.mkdtemp(prefix="mtrl-soak-"))
    markers, runs = work / "markers", work / "runs"
    cfg = parse_config(config(markers, runs))
    n_segments = max(2, round(args.minutes / args.segment_minutes))
    segments: list[dict[str, Any]] = []
    run_dir: Path | None = None
    t_start = time.monotonic()
    for k in range(n_segments):
        before = markers_per_task(markers)
        trainer = (
            Trainer(cfg, console=False)
            if run_dir is None
            else Trainer.resume(run_dir, console=False)
        )
        run_dir = trainer.run_dir
        timer = threading.Timer(args.segment_minutes * 60, trainer.request_stop)
        sampler = Sampler()
        timer.start()
        sampler.start()
        try:
            result = trainer.run()
        finally:
            timer.cancel()
            samples = sampler.stop()
            faults = [
                {"faults": f.faults, "by_kind": dict(f.by_kind), "quarantined": f.quarantined}
                for f in trainer.pool.faults
            ]
            episodes = [p.episodes for p in trainer.progress]
            trainer.close()
        after = markers_per_task(markers)
        seg = {
            "segment": k,
            "env_steps": result.env_steps,
            "updates": result.updates,
            "learner_rss_mb": rss_kb(os.getpid()) / 1024,
            "peak_learner_rss_mb": max((s[0] for s in samples), default=0) / 1024,
            "peak_actors_rss_mb": max((s[1] for s in samples), default=0) / 1024,
            "faults": {n: f for n, f in zip(FAULTS, faults, strict=True)},
            "instances_made_faulty": {n: after[n] - before[n] for n in FAULTS},
            "episodes": dict(zip(FAULTS, episodes, strict=True)),
            **leftovers(),
        }
        segments.append(seg)
        print(
            f"segment {k}: {seg['env_steps']:,} env steps, {seg['updates']:,} updates, "
            f"learner RSS {seg['learner_rss_mb']:.0f} MB (peak {seg['peak_learner_rss_mb']:.0f}"
            f", actors {seg['peak_actors_rss_mb']:.0f}), faults "
            + ", ".join(
                f"{n} {f['faults']}/{seg['instances_made_faulty'][n]}"
                for n, f in seg["faults"].items()
            )
            + f", fds {seg['fds']}, threads {seg['threads']}, children {seg['children']}, "
            f"shm {seg['shm_segments']}",
            flush=True,
        )
    assert run_dir is not None
    rows: dict[str, int] = {}
    with (run_dir / "episodes.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            rows[row["task"]] = rows.get(row["task"], 0) + 1
    last, warm = segments[-1], segments[0]
    growth = last["learner_rss_mb"] / warm["learner_rss_mb"]
    checks = {
        "memory_growth_after_warmup": growth,
        "memory_ok": growth <= MEMORY_GROWTH_LIMIT,
        "no_leaks": all(
            s[key] <= warm[key]
            for s in segments
            for key in ("fds", "threads", "children", "shm_segments")
        ),
        "every_fault_counted": all(
            0 <= s["instances_made_faulty"][n] - s["faults"][n]["by_kind"][kind] <= UNFAULTED_SLACK
            for s in segments
            for n, (_, kind) in FAULTS.items()
        ),
        "other_faults": sum(
            s["faults"][n]["faults"] - s["faults"][n]["by_kind"][kind]
            for s in segments
            for n, (_, kind) in FAULTS.items()
        ),
        "no_quarantine": not any(f["quarantined"] for s in segments for f in s["faults"].values()),
        "episodes_csv_rows": rows,
        "episodes_counted": last["episodes"],
        "no_episode_lost": rows == last["episodes"],
    }
    total = {n: sum(s["faults"][n]["faults"] for s in segments) for n in FAULTS}
    print(f"faults counted over the run: {total}")
    print(f"checks: {checks}")
    payload = {
        "minutes": (time.monotonic() - t_start) / 60,
        "segment_minutes": args.segment_minutes,
        "machine": machine(),
        "segments": segments,
        "faults_total": total,
        "checks": checks,
    }
    print(f"wrote {write_result(args.name, payload)}")
    ok = checks["other_faults"] == 0 and all(v for v in checks.values() if isinstance(v, bool))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
