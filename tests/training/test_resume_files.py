"""After ``kill -9`` and resume, a run's metric files read as one run: nothing the killed run
logged past its checkpoint is left, so env steps never go back in ``episodes.csv``,
``metrics.jsonl`` or ``metrics.csv``."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mtrl.checkpoint import checkpoint_step, list_checkpoints
from mtrl.cli import main

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]


def _steps(run_dir: Path) -> list[int]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(x)["charts/env_steps"] for x in lines if x.strip()]


def _kill_past_a_checkpoint(cfg: Path, runs: Path) -> tuple[Path, int]:
    """Train, and SIGKILL once a metrics record past a checkpoint is on disk."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mtrl.cli", "train", str(cfg)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            found = list(runs.glob("files__*"))
            ckpts = list_checkpoints(found[0]) if found else []
            try:
                logged = _steps(found[0]) if ckpts else []
            except (ValueError, KeyError):  # a record half written: look again
                logged = []
            if ckpts and logged and max(logged) > (checkpoint_step(ckpts[0]) or 0) + 1500:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.communicate()[1]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    (run_dir,) = runs.iterdir()
    return run_dir, checkpoint_step(list_checkpoints(run_dir)[-1]) or 0


def test_env_steps_never_go_back_in_a_resumed_runs_files(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    cfg = tmp_path / "files.yaml"
    cfg.write_text(
        f"""
name: files
total_env_steps: 10000000
tasks:
  - {{env: gymnasium/CartPole-v1, name: a, num_envs: 4}}
  - {{env: gymnasium/CartPole-v1, name: b, num_envs: 8}}
actors: {{mode: serial}}
learner: {{unroll_length: 16, batch_size: 8, model: {{encoder_dim: 16, torso: [16]}}}}
checkpoint: {{every_env_steps: 1000000, every_s: 0.5}}
tracking: {{run_dir: {runs}, console: quiet, log_every_s: 0.05, final_eval_episodes: 0,
            wandb: {{mode: disabled}}}}
"""
    )
    run_dir, at = _kill_past_a_checkpoint(cfg, runs)
    assert max(_steps(run_dir)) > at, "the killed run logged nothing past its checkpoint"
    assert main(["train", "--resume", str(run_dir), "--total-env-steps", str(at + 3000)]) == 0

    steps = _steps(run_dir)
    assert steps == sorted(steps) and steps[-1] >= at + 3000, steps
    with (run_dir / "metrics.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    column = [float(r["charts/env_steps"]) for r in rows]
    assert column == sorted(column), column
    with (run_dir / "episodes.csv").open(newline="") as f:
        episodes = list(csv.DictReader(f))
    for task in ("a", "b"):
        task_steps = [int(r["env_steps"]) for r in episodes if r["task"] == task]
        assert task_steps and task_steps == sorted(task_steps), task
