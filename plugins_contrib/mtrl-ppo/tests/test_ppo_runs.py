"""PPO through mtrl's trainer on real envs: a CartPole run checkpoints and resumes with the
rule's state (version, PopArt statistics, optimiser); the multi-task config (Pendulum's Box
actions beside CartPole's Discrete ones) trains through ``mtrl train`` with worker-process
actors (unrolls up to a version behind) and resumes from its run directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mtrl_ppo.learner import PpoLearner

from mtrl.config import parse_config
from mtrl.plugins import load_plugins
from mtrl.train.trainer import Trainer

pytestmark = pytest.mark.timeout(300)

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

TINY = """
seed: 1
total_env_steps: 4096
tasks: [{env: gymnasium/CartPole-v1, num_envs: 8}]
actors: {mode: serial}
learner: {algorithm: ppo, unroll_length: 32, batch_size: 8, max_grad_norm: 0.5,
          model: {encoder_dim: 32, torso: [32], activation: tanh}}
tracking: {console: quiet, csv: false, wandb: {mode: disabled}, final_eval_episodes: 0,
           run_dir: RUNS}
"""


def _mtrl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``mtrl ARGS`` in a subprocess with the built-in plugins and this one only."""
    env = {**os.environ, "MTRL_PLUGINS": "ppo", "WANDB_MODE": "disabled"}
    return subprocess.run(
        [sys.executable, "-m", "mtrl.cli", *args],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        cwd=cwd,
    )


def test_a_cartpole_run_checkpoints_and_resumes_with_the_rules_state(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    plugins = load_plugins()
    cfg = parse_config(TINY.replace("RUNS", str(tmp_path / "runs")), **plugins.config_context())
    trainer = Trainer(cfg, plugins, console=False)
    try:
        result = trainer.run()
        learner = trainer.learner
        assert isinstance(learner, PpoLearner)
        version = learner.version
        mu, nu = learner.values.mu.clone(), learner.values.nu.clone()
        weights = {k: v.clone() for k, v in learner.model.state_dict().items()}
    finally:
        trainer.close()
    assert result.updates == version == 4096 // (32 * 8)
    assert bool(learner.values.seen[0]) and float(mu[0]) > 1.0, "PopArt saw CartPole's returns"
    resumed = Trainer.resume(result.run_dir, plugins, console=False, total_env_steps=8192)
    try:
        back = resumed.learner
        assert isinstance(back, PpoLearner)
        assert back.version == version
        assert torch.equal(back.values.mu, mu) and torch.equal(back.values.nu, nu)
        assert all(torch.equal(v, weights[k]) for k, v in back.model.state_dict().items())
        assert back.optimizer.state_dict()["state"], "the optimiser's moments came back"
        again = resumed.run()
        assert back.version == 2 * version and again.env_steps >= 8192
    finally:
        resumed.close()


def _records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines if x.strip()]


def test_the_multitask_config_trains_with_process_actors_and_resumes(tmp_path: Path) -> None:
    text = (CONFIGS / "ppo_pendulum_cartpole.yaml").read_text()
    text = text.replace("  mode: serial\n", "  mode: process\n")
    text = text.replace("unroll_length: 128", "unroll_length: 32")
    text = text.replace("  log_every_s: 10\n", "  log_every_s: 0.5\n")
    text += f"  run_dir: {tmp_path / 'runs'}\n  console: quiet\n"
    text += "  final_eval_episodes: 0\nscheduler: {num_actors: 2}\n"
    path = tmp_path / "mt.yaml"
    path.write_text(text)
    first = _mtrl("train", str(path), "--total-env-steps", "6000", cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = _records(run_dir)
    last = next(r for r in reversed(records) if "losses/total" in r)
    for task in ("gymnasium/Pendulum-v1", "gymnasium/CartPole-v1"):
        assert f"popart/{task}/sigma" in last, sorted(last)
    assert any("losses/clip_fraction" in r for r in records)
    steps_before = max(r.get("charts/env_steps", 0) for r in records)
    second = _mtrl("train", "--resume", str(run_dir), "--total-env-steps", "12000", cwd=tmp_path)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    steps_after = max(r.get("charts/env_steps", 0) for r in _records(run_dir))
    assert steps_after >= 12000 > steps_before
