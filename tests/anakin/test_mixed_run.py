"""Anakin and Sebulba tasks in one multi-task run: both feed every update and both learn
(random CartPole scores ≈ 22)."""

from __future__ import annotations

import math

import pytest

from mtrl.config import parse_config
from mtrl.errors import UserError
from mtrl.train.trainer import Trainer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.mark.parametrize("mode", ["serial", "process"])
def test_an_anakin_task_and_an_actor_task_train_together(mode: str) -> None:
    cfg = parse_config(
        f"""
        total_env_steps: 800000
        stop_at_target: true
        tasks:
          - env: tensor/CartPole-v1
            name: anakin-cartpole
            anakin: true
            num_envs: 32
            target_score: 80
          - env: gymnasium/CartPole-v1
            name: actor-cartpole
            num_envs: 16
            target_score: 60
        actors: {{mode: {mode}}}
        learner: {{batch_size: 48, model: {{encoder_dim: 64, torso: [64]}}}}
        tracking: {{console: quiet, wandb: {{mode: disabled}}}}
        """
    )
    trainer = Trainer(cfg, write_run_dir=False, console=False)
    try:
        assert trainer.pool.actors_per_task()[0] == 0, "the Anakin task runs no actors"
        result = trainer.run()
    finally:
        trainer.close()
    by_name = {t.name: t for t in result.tasks}
    for name in ("anakin-cartpole", "actor-cartpole"):
        t = by_name[name]
        assert t.env_steps > 0 and t.episodes > 0, t
        # The training return (``solved`` also wants the final greedy eval at target).
        assert t.mean_return is not None and t.target_score is not None
        assert t.mean_return >= t.target_score, f"{name}: {t.mean_return} after {t.env_steps}"
        # The final greedy eval plays an Anakin task through its env's numpy face.
        assert t.greedy_eval is not None and math.isfinite(t.greedy_eval), t


def test_anakin_on_a_numpy_env_is_a_clear_user_error() -> None:
    cfg = parse_config(
        """
        tasks:
          - {env: gymnasium/CartPole-v1, anakin: true}
        actors: {mode: serial}
        """
    )
    with pytest.raises(UserError, match=r"tasks\[0\].*tensor-native"):
        Trainer(cfg, write_run_dir=False, console=False)
