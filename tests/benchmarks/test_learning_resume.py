"""A learning benchmark's training killed part-way (its machine taken back) goes on from its
newest checkpoint on the next call with ``--reuse``: the same run directory, the wall time of
both attempts summed, and the final agent evaluated once it ends."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import learning_runs as lr  # noqa: E402
import learning_stats as ls  # noqa: E402

pytestmark = pytest.mark.slow

CONFIG = {
    "name": "resume_probe",
    "total_env_steps": 2500,
    "tasks": [{"env": "gymnasium/CartPole-v1", "num_envs": 1}],
    "actors": {"mode": "serial"},
    "learner": {"algorithm": "sac", "sac": {"learning_starts": 200}},
    "checkpoint": {"every_env_steps": 300, "every_s": None},
    "tracking": {"log_every_s": 1},
}


def _children() -> list[int]:
    """This process's child processes (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
            found.append(int(entry.name))
    return found


def _wait_for(check, what: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _plan(
    tmp_path: Path, work: str, data: dict, extend: Path | None = None, name: str = "probe"
) -> lr.Plan:
    """A plan of one CartPole seed in ``tmp_path/work``, its subfolders made."""
    plan = lr.Plan(
        name,
        tmp_path / "probe.yaml",
        [],
        data,
        [ls.Task("gymnasium/CartPole-v1", "gymnasium/CartPole-v1", None, None)],
        [0],
        tmp_path / work,
        1,
        1,
        True,
        extend=extend,
    )
    for sub in ("configs", "logs", "started", "trained", "done"):
        (plan.work_dir / sub).mkdir(parents=True)
    return plan


def test_a_killed_training_resumes_from_its_checkpoint(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(lr, "HEARTBEAT_S", 0.5)
    plan = _plan(tmp_path, "work", CONFIG, name="resume_probe")
    first: list[lr.SeedRun] = []
    worker = threading.Thread(target=lambda: first.append(lr.run_seed(plan, 0)))
    worker.start()
    started = plan.work_dir / "started" / "seed0.json"

    def checkpointed() -> bool:
        if not started.is_file():
            return False
        run_dir = json.loads(started.read_text())["run_dir"]
        return run_dir is not None and any(Path(run_dir, "checkpoints").glob("ckpt_*.pt"))

    _wait_for(checkpointed, "the first checkpoint")
    for pid in _children():
        os.kill(pid, signal.SIGKILL)
    worker.join(timeout=120)
    assert first and first[0].error is not None  # killed: no evaluation, no done record
    assert not (plan.work_dir / "done" / "seed0.json").exists()
    run_dir = Path(json.loads(started.read_text())["run_dir"])
    spent = json.loads(started.read_text())["train_wall_s"]

    second = lr.run_seed(plan, 0)
    assert second.error is None, second.error
    assert second.run_dir == run_dir  # the same run, continued
    assert second.train_wall_s > spent  # both attempts counted
    log = (plan.work_dir / "logs" / "seed0.train.log").read_text()
    assert f"resumed from {run_dir}" in log
    done = json.loads((plan.work_dir / "done" / "seed0.json").read_text())
    assert done["eval"]["gymnasium/CartPole-v1"]["greedy"] is not None
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["total_env_steps"] == 2500
    steps = [json.loads(x).get("charts/env_steps") for x in (run_dir / "metrics.jsonl").open()]
    assert max(s for s in steps if s is not None) >= 2500


def test_a_finished_run_is_extended_to_a_larger_budget(tmp_path: Path) -> None:
    """``--extend``: a seed trained at 1,500 env steps goes on from its final checkpoint to
    3,000 in a copy of its run directory (the earlier run untouched), its wall time carried
    over; a run that trained other settings is refused, naming them."""
    short = _plan(tmp_path, "short", {**CONFIG, "total_env_steps": 1500})
    first = lr.run_seed(short, 0)
    assert first.error is None, first.error
    before = (first.run_dir / "metrics.jsonl").read_text()

    long = _plan(tmp_path, "long", {**CONFIG, "total_env_steps": 3000}, extend=short.work_dir)
    second = lr.run_seed(long, 0)
    assert second.error is None, second.error
    assert second.run_dir == long.work_dir / first.run_dir.name  # the copy, continued
    assert (first.run_dir / "metrics.jsonl").read_text() == before  # the earlier run as it was
    assert second.train_wall_s > first.train_wall_s
    log = (long.work_dir / "logs" / "seed0.train.log").read_text()
    assert re.search(r"from ckpt_\d+\.pt at 1,5\d\d env steps", log), log  # its final one
    rows = (second.run_dir / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(x).get("charts/env_steps") for x in rows]
    assert max(s for s in steps if s is not None) >= 3000
    assert min(s for s in steps if s is not None) < 1500  # the curve from the start
    progress = lr.in_progress(long)  # what --progress reports: the run as it stands
    assert [(r.seed, r.run_dir) for r in progress] == [(0, second.run_dir)]
    assert progress[0].eval == {} and progress[0].train_wall_s >= first.train_wall_s

    other = {**CONFIG, "total_env_steps": 3000, "learner": {"algorithm": "sac", "gamma": 0.9}}
    refused = lr.run_seed(_plan(tmp_path, "other", other, extend=short.work_dir), 0)
    assert refused.error is not None and "trained other learner" in refused.error
