"""PPO learns: ``configs/ppo_cartpole.yaml`` on its fixed seed brings CartPole's mean return
of the last 20 episodes to 475 within its 200k env steps (52k measured; ~10 s alone), and the
final agent's greedy eval agrees."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mtrl.config import load_config
from mtrl.plugins import load_plugins
from mtrl.train.trainer import Trainer

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "ppo_cartpole.yaml"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ppo_solves_cartpole_on_the_configs_seed(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    plugins = load_plugins()
    cfg = load_config(CONFIG, **plugins.config_context())
    cfg = cfg.model_copy(
        update={"tracking": cfg.tracking.model_copy(update={"run_dir": str(tmp_path)})}
    )
    trainer = Trainer(cfg, plugins, console=False)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    (task,) = result.tasks
    assert result.env_steps <= 200_000
    assert task.mean_return is not None and task.mean_return >= 475, task
    assert task.greedy_eval is not None and task.greedy_eval >= 475, task
