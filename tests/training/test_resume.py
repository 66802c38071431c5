"""Kill a real training process with SIGKILL at random moments, resume it each time: no
checkpoint is ever corrupt, at most one checkpoint interval is lost, and a resumed learner
starts from exactly the state saved."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mtrl.checkpoint import list_checkpoints, load_checkpoint, load_latest
from mtrl.config import parse_config
from mtrl.train.trainer import Trainer

pytestmark = pytest.mark.timeout(600)

INTERVAL = 4000


def _config(tmp_path: Path, total: int) -> str:
    return f"""
name: resume
total_env_steps: {total}
tasks:
  - {{env: gymnasium/CartPole-v1, num_envs: 8}}
  - {{env: minatar/breakout, num_envs: 8}}
actors: {{mode: serial}}
learner: {{batch_size: 16, model: {{encoder_dim: 32, torso: [32]}}}}
checkpoint: {{every_env_steps: {INTERVAL}, every_s: null, keep_last: 3}}
tracking: {{run_dir: {tmp_path / "runs"}, log_every_s: 0.2, console: quiet, csv: false,
            wandb: {{mode: disabled}}}}
"""


def _last_logged_steps(run_dir: Path) -> int:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return max((json.loads(x)["charts/env_steps"] for x in lines if x.strip()), default=0)


def _kill_when_checkpointed(cmd: list[str], tmp_path: Path, after_step: int, rng: random.Random):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            runs = list((tmp_path / "runs").glob("resume__*"))
            if runs and any(
                int(p.stem.split("_")[1]) > after_step for p in list_checkpoints(runs[0])
            ):
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(rng.uniform(0.0, 0.6))  # a random moment: mid-step, mid-update, mid-save
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    (run_dir,) = (tmp_path / "runs").glob("resume__*")
    return run_dir


@pytest.mark.slow
def test_sigkill_and_resume_repeatedly(tmp_path: Path) -> None:
    cfg = tmp_path / "resume.yaml"
    total = 60_000
    cfg.write_text(_config(tmp_path, total))
    rng = random.Random(0)
    base = [sys.executable, "-m", "mtrl.cli", "train"]
    run_dir = _kill_when_checkpointed([*base, str(cfg)], tmp_path, 0, rng)
    for _ in range(3):
        for path in list_checkpoints(run_dir):  # every checkpoint left behind loads
            load_checkpoint(path)
        state, path = load_latest(run_dir)
        lost = _last_logged_steps(run_dir) - state["env_steps"]
        assert lost <= INTERVAL + 2 * 8 * 20 * 2, f"lost {lost} env steps past {path.name}"
        run_dir = _kill_when_checkpointed(
            [*base, "--resume", str(run_dir)], tmp_path, state["env_steps"], rng
        )
    done = subprocess.run(
        [*base, "--resume", str(run_dir)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    state, _ = load_latest(run_dir)
    assert state["env_steps"] >= total
    assert "resumed" in done.stdout


def test_a_resumed_learner_equals_the_saved_state(tmp_path: Path) -> None:
    trainer = Trainer(parse_config(_config(tmp_path, 6000)), console=False)
    try:
        trainer.run()
        run_dir = trainer.run_dir
    finally:
        trainer.close()
    saved, _ = load_latest(run_dir)
    resumed = Trainer.resume(run_dir, console=False, total_env_steps=12000)  # finished: extend
    try:
        now = resumed.learner.state_dict()
        for k, v in saved["learner"]["model"].items():
            assert torch.equal(now["model"][k], v), k
        assert torch.equal(now["mu"], saved["learner"]["mu"])
        assert torch.equal(now["nu"], saved["learner"]["nu"])
        assert now["version"] == saved["learner"]["version"]
        opt_now, opt_saved = now["optimizer"]["state"], saved["learner"]["optimizer"]["state"]
        for k in opt_saved:
            for name, v in opt_saved[k].items():
                assert torch.equal(torch.as_tensor(opt_now[k][name]), torch.as_tensor(v))
        assert resumed.env_steps == saved["env_steps"]
        assert resumed.updates == saved["updates"]
    finally:
        resumed.close()
