"""The README's data-parallel command: ``mtrl train CONFIG --nproc 2`` trains under torchrun."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _config(tmp_path: Path, name: str, total: int, learner: str, extra: str = "") -> Path:
    """Two tasks (CartPole, Pendulum), serial actors, small model; ``learner`` adds keys."""
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(
        f"""
name: {name}
total_env_steps: {total}
tasks:
  - env: gymnasium/CartPole-v1
    num_envs: 8
  - env: gymnasium/Pendulum-v1
    num_envs: 8
actors: {{mode: serial}}
learner: {{model: {{encoder_dim: 32, torso: [32]}}, {learner}}}
tracking: {{run_dir: {tmp_path / "runs"}, log_every_s: 1, console: plain,
            wandb: {{mode: disabled}}}}
{extra}
"""
    )
    return cfg


def _train(*args: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [sys.executable, "-m", "mtrl.cli", "train", *args, "--nproc", "2"],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


def test_two_replicas_train_from_one_command(tmp_path: Path) -> None:
    res = _train(str(_config(tmp_path, "dp", 24000, "batch_size: 16")))
    (run_dir,) = (tmp_path / "runs").iterdir()  # rank 0 alone writes a run directory
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").open()]
    last = records[-1]
    # Steps are counted over both replicas; each replica stepped its own actors.
    assert last["charts/env_steps"] >= 24000
    assert last["task/gymnasium/CartPole-v1/env_steps"] < last["charts/env_steps"] / 1.5
    assert list((run_dir / "checkpoints").glob("ckpt_*.pt"))
    assert res.stdout.count("run directory:") == 1
    # Rank 0 alone plays the final greedy eval (data parallel: it holds the whole model).
    assert res.stdout.count("greedy eval") == 2  # the table's column and its caption
    for task in ("gymnasium/CartPole-v1", "gymnasium/Pendulum-v1"):
        assert isinstance(last[f"eval/{task}/greedy_return"], float)


def test_a_task_sharded_run_checkpoints_the_whole_learner_and_resumes(tmp_path: Path) -> None:
    learner = "batch_size: 8, parallel: {model_parallel: task_sharded}"
    extra = "checkpoint: {every_env_steps: 8000}"
    res = _train(str(_config(tmp_path, "sharded", 16000, learner, extra)))
    assert "greedy eval skipped: the model is split over the ranks" in res.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    ckpts = sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))
    assert len(ckpts) == 2, "a periodic checkpoint (8k steps) and the final one (16k)"
    state = torch.load(ckpts[-1], weights_only=True)
    # Each rank holds one task's encoder and head; the checkpoint holds both tasks', with
    # their optimiser state (keyed by parameter name).
    for part in (state["learner"]["model"], state["learner"]["optimizer"]["state"]):
        for prefix in ("encoders.0.", "encoders.1.", "policy_heads.0.", "policy_heads.1."):
            assert any(k.startswith(prefix) for k in part), prefix
    _train("--resume", str(run_dir), "--total-env-steps", "32000")
    last = torch.load(sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))[-1], weights_only=True)
    assert last["env_steps"] > state["env_steps"]
    assert last["learner"]["version"] > state["learner"]["version"]


def test_a_data_parallel_sac_run_trains_checkpoints_its_replay_and_resumes(tmp_path: Path) -> None:
    learner = (
        "algorithm: sac, batch_size: 8, unroll_length: 8, "
        "sac: {learning_starts: 400, batch_size: 64, replay_ratio: 4}"
    )
    extra = "checkpoint: {replay: true}"
    res = _train(str(_config(tmp_path, "sac_dp", 8000, learner, extra)))
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").open()]
    last = records[-1]
    assert last["charts/env_steps"] >= 8000
    # Both replicas' env steps owe gradient steps of 2 x 64 samples at 4 samples per step.
    assert last["sac/gradient_steps"] > 0.75 * (8000 - 2 * 800) * 4 / 128  # one rank alone: 0.5
    assert all(math.isfinite(last[k]) for k in ("losses/critic", "losses/actor"))
    (ckpt,) = sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))
    state = torch.load(ckpt, weights_only=True)
    assert len(state["learner"]["replay"]) == 2  # rank 0's replay of each task
    res = _train("--resume", str(run_dir), "--total-env-steps", "12000")
    # Rank 0 takes its replay back, rank 1 refills its own and says so.
    assert "rank 1: the checkpoint holds rank 0's replay only" in res.stdout + res.stderr
    last = torch.load(sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))[-1], weights_only=True)
    assert last["env_steps"] > state["env_steps"]
    assert last["learner"]["gradient_steps"] > state["learner"]["gradient_steps"]


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="two GPUs take two CUDA replicas")
def test_cuda_replicas_without_a_gpu_each_are_refused_before_launching(tmp_path: Path) -> None:
    """No GPU, or one GPU for two replicas: one line and exit 2, before torchrun starts."""
    cfg = _config(tmp_path, "cuda2", 1000, "device: cuda")
    res = subprocess.run(
        [sys.executable, "-m", "mtrl.cli", "train", str(cfg), "--nproc", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    assert "launching" not in res.stdout
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: device 'cuda'") and "use device: cpu" in line, line


@pytest.mark.parametrize("sync", ["local_sgd", "diloco", "async"])
def test_loosely_synchronised_replicas_train_checkpoint_and_resume(
    tmp_path: Path, sync: str
) -> None:
    """``learner.parallel.sync``: each replica learns alone and they combine every 4 updates;
    the run stops near its budget, ends with one model, and resumes with its outer state."""
    learner = f"batch_size: 8, parallel: {{sync: {sync}, sync_every: 4}}"
    _train(str(_config(tmp_path, sync, 16000, learner)))
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").open()]
    last = records[-1]
    assert last["charts/env_steps"] >= 16000
    updates = last["charts/updates"]  # rank 0's
    if sync != "async":  # joint decisions at syncs, the last periods shortened to the budget
        assert last["charts/env_steps"] < 16000 + 2 * 2 * 8 * 20 * 4
        assert last["sync/count"] >= updates // 4 >= 4
    else:  # a send every 4 updates, none waited for (a replica may run far ahead of another)
        assert last["sync/sent"] + last["sync/dropped"] == updates // 4
    assert (last["sync/bytes_sent"] > 0) == (updates >= 4)
    (ckpt,) = sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))
    state = torch.load(ckpt, weights_only=True)
    assert state["sync"]["next_at"] > 0
    if sync == "diloco":
        assert state["sync"]["momentum"].abs().sum() > 0
    _train("--resume", str(run_dir), "--total-env-steps", "24000")
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").open()]
    assert records[-1]["charts/env_steps"] >= 24000
    last = torch.load(sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))[-1], weights_only=True)
    assert last["env_steps"] > state["env_steps"]  # rank 0's own steps
    assert last["learner"]["version"] > state["learner"]["version"]
