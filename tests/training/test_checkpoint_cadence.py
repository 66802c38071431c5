"""How often a run checkpoints by default, and what resuming a run that stopped before its
first checkpoint says: a crash of an expensive run loses at most a minute, a large
checkpoint's writes stay a small share of the run, and the resume error names the setting
that would have saved it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mtrl.checkpoint import list_checkpoints
from mtrl.cli import main
from mtrl.config import CheckpointConfig
from mtrl.train.checkpointing import WRITE_SHARE, Checkpoints

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]


def test_by_default_a_crash_loses_at_most_a_minute(tmp_path: Path) -> None:
    ck = Checkpoints(CheckpointConfig(), tmp_path)
    assert not ck.due(steps_since=100, seconds_since=59.0)
    assert ck.due(steps_since=100, seconds_since=60.0)  # 11k slow env steps, not 1M


def test_a_slow_write_stretches_the_interval_to_keep_its_share_small(tmp_path: Path) -> None:
    ck = Checkpoints(CheckpointConfig(every_s=60.0), tmp_path)
    ck.last_write_s = 3.0  # a large replay: 50 x 3 s = 150 s between writes
    assert not ck.due(steps_since=100, seconds_since=149.0)
    assert ck.due(steps_since=100, seconds_since=WRITE_SHARE * 3.0)
    assert ck.due(steps_since=10**9, seconds_since=1.0)  # the step cadence is not stretched


def test_resuming_a_run_killed_before_its_first_checkpoint_names_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "early.yaml"
    runs = tmp_path / "runs"
    cfg.write_text(
        f"""
name: early
total_env_steps: 10000000
tasks: [{{env: gymnasium/CartPole-v1, num_envs: 4}}]
actors: {{mode: serial}}
learner: {{unroll_length: 16, batch_size: 8, model: {{encoder_dim: 16, torso: [16]}}}}
tracking: {{run_dir: {runs}, console: quiet, log_every_s: 0.1, wandb: {{mode: disabled}}}}
"""
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "mtrl.cli", "train", str(cfg)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # training: a metrics record is on disk
            found = list(runs.glob("early__*/metrics.jsonl"))
            if found and found[0].stat().st_size > 0:
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    (run_dir,) = runs.iterdir()
    assert not list_checkpoints(run_dir)
    capsys.readouterr()
    assert main(["train", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "no checkpoints" in err and "stopped before its first checkpoint" in err
    assert "checkpoint.every_s: 60 s" in err and "shorter checkpoint.every_s" in err
