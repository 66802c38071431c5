"""Real learning on CPU: the agent must actually learn, not just run."""

from __future__ import annotations

import pytest

from mtrl.config import parse_config
from mtrl.train.trainer import Trainer, TrainResult

pytestmark = pytest.mark.slow


def _train(yaml_text: str) -> TrainResult:
    trainer = Trainer(parse_config(yaml_text), write_run_dir=False, console=False)
    try:
        return trainer.run()
    finally:
        trainer.close()


@pytest.mark.parametrize("inference", ["central", "local"])
def test_cartpole_is_solved(inference: str) -> None:
    """Actor processes acting through the inference server or with their own policy copy."""
    result = _train(
        f"""
        total_env_steps: 800000
        stop_at_target: true
        tasks:
          - env: gymnasium/CartPole-v1
            num_envs: 16
            target_score: 475
        learner: {{batch_size: 16}}
        actors: {{inference: {inference}}}
        """
    )
    (task,) = result.tasks
    # The training return at target (``solved`` also wants the final greedy eval there).
    assert task.mean_return is not None and task.mean_return >= 475, (
        f"CartPole mean return {task.mean_return} after {result.env_steps} steps"
    )


def test_three_heterogeneous_tasks_each_learn_well_above_random() -> None:
    """Discrete-vector, image and continuous-vector tasks trained together by one agent."""
    result = _train(
        """
        total_env_steps: 900000
        stop_at_target: true
        tasks:
          - env: gymnasium/CartPole-v1       # random ~22
            num_envs: 16
            target_score: 200
          - env: minatar/breakout            # random ~0.38
            num_envs: 16
            target_score: 2.5
          - env: gymnasium/InvertedPendulum-v5   # random ~5
            num_envs: 16
            target_score: 500
        actors: {mode: serial}   # deterministic: learning, not scheduling, is under test here
        learner: {batch_size: 48}
        """
    )
    for task in result.tasks:  # the training return (not the final greedy eval) at target
        assert task.mean_return is not None and task.mean_return >= task.target_score, (
            f"{task.name}: mean return {task.mean_return} < {task.target_score} after "
            f"{task.env_steps} steps"
        )
