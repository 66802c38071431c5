"""A task only memory solves, learned in CI: ``memory/CueRecall-v0`` shows a cue at the first
step and pays +1 / -1 for naming it at the last, four blank steps later. With a recurrent core
(``learner.model.core``) the agent scores ~1; the same run feed-forward stays at chance (0).
Real trainer, serial actors, small model; the recurrent run is also resumed and evaluated from
its checkpoint, and trains beside CartPole in one model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mtrl.checkpoint import load_latest
from mtrl.config import parse_config
from mtrl.train.evaluate import evaluate, load_for_eval
from mtrl.train.progress import TrainResult
from mtrl.train.trainer import Trainer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

ENV = "memory/CueRecall-v0"


def _train(text: str) -> tuple[Trainer, TrainResult]:
    trainer = Trainer(parse_config(text), console=False)
    try:
        return trainer, trainer.run()
    finally:
        trainer.close()


def _config(tmp_path: Path, core: str, steps: int, extra_task: str = "") -> str:
    return f"""
name: memory
total_env_steps: {steps}
seed: 1
tasks:
  - {{env: {ENV}, num_envs: 16}}
{extra_task}
actors: {{mode: serial}}
learner: {{batch_size: 16, unroll_length: 12, learning_rate: 0.003, lr_schedule: constant,
          model: {{encoder_dim: 32, torso: [32], core: {core}}}}}
checkpoint: {{every_env_steps: null, every_s: null}}
tracking: {{run_dir: {tmp_path / "runs"}, console: quiet, csv: false,
            wandb: {{mode: disabled}}, final_eval_episodes: 200}}
"""


@pytest.fixture(scope="module")
def recurrent_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TrainResult]:
    trainer, result = _train(_config(tmp_path_factory.mktemp("lstm"), "lstm", 30_000))
    assert trainer.model.recurrent
    return result.run_dir, result


def test_the_recurrent_core_learns_the_memory_task_and_feed_forward_cannot(
    recurrent_run: tuple[Path, TrainResult], tmp_path: Path
) -> None:
    (task,) = recurrent_run[1].tasks
    assert task.mean_return is not None and task.mean_return >= 0.8, task
    assert task.greedy_eval is not None and task.greedy_eval >= 0.9, task
    _, result = _train(_config(tmp_path, "none", 30_000))
    (ff,) = result.tasks
    assert ff.mean_return is not None and ff.mean_return <= 0.6, ff  # 20 episodes: σ ≈ 0.22
    assert ff.greedy_eval is not None and abs(ff.greedy_eval) <= 0.3, ff  # 200: σ ≈ 0.07


def test_a_recurrent_run_evaluates_and_resumes_from_its_checkpoint(
    recurrent_run: tuple[Path, TrainResult],
) -> None:
    """`mtrl eval` rebuilds the core from the checkpoint's config; a resumed learner starts
    from exactly the saved core (its actors' states restart from zeros with fresh envs)."""
    run_dir, first = recurrent_run
    (greedy,) = evaluate(load_for_eval(run_dir), episodes=100, modes=("greedy",))
    assert greedy.mean_return >= 0.9, greedy
    state, _ = load_latest(run_dir)
    saved = state["learner"]["model"]
    assert any(k.startswith("core.cell.") for k in saved)
    trainer = Trainer.resume(run_dir, console=False, total_env_steps=first.env_steps + 6_000)
    try:
        for name, value in trainer.model.state_dict().items():
            assert torch.equal(value.cpu(), saved[name].cpu()), name  # the learner's device
        result = trainer.run()
    finally:
        trainer.close()
    (task,) = result.tasks
    assert task.greedy_eval is not None and task.greedy_eval >= 0.9, task


def test_the_memory_task_trains_beside_cartpole_in_one_model(tmp_path: Path) -> None:
    """One shared LSTM core serves both: the memory task reaches its optimum while CartPole,
    which needs no memory, learns well above random (~22)."""
    cartpole = "  - {env: gymnasium/CartPole-v1, num_envs: 16}"
    text = _config(tmp_path, "{kind: lstm, hidden: 64}", 100_000, cartpole)
    text = text.replace("batch_size: 16", "batch_size: 32").replace("[32]", "[64]")
    _, result = _train(text)
    memory, pole = result.tasks
    assert memory.greedy_eval is not None and memory.greedy_eval >= 0.9, memory
    assert pole.mean_return is not None and pole.mean_return >= 100, pole
