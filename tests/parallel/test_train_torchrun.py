"""The README's data-parallel command: ``mtrl train CONFIG --nproc 2`` trains under torchrun."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)


def test_two_replicas_train_from_one_command(tmp_path: Path) -> None:
    cfg = tmp_path / "dp.yaml"
    cfg.write_text(
        f"""
name: dp
total_env_steps: 24000
tasks:
  - env: gymnasium/CartPole-v1
    num_envs: 8
  - env: gymnasium/Pendulum-v1
    num_envs: 8
actors: {{mode: serial}}
learner: {{batch_size: 16, model: {{encoder_dim: 32, torso: [32]}}}}
tracking: {{run_dir: {tmp_path / "runs"}, log_every_s: 1, console: plain,
            wandb: {{mode: disabled}}}}
"""
    )
    res = subprocess.run(
        [sys.executable, "-m", "mtrl.cli", "train", str(cfg), "--nproc", "2"],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()  # rank 0 alone writes a run directory
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").open()]
    last = records[-1]
    # Steps are counted over both replicas; each replica stepped its own actors.
    assert last["charts/env_steps"] >= 24000
    assert last["task/gymnasium/CartPole-v1/env_steps"] < last["charts/env_steps"] / 1.5
    assert list((run_dir / "checkpoints").glob("ckpt_*.pt"))
    assert res.stdout.count("run directory:") == 1
