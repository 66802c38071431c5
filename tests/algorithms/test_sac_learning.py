"""SAC learns a continuous and a discrete task together: configs/sac_pendulum_cartpole.yaml as
shipped (serial actors, one multi-task run), watched until the mean of each task's last 20
training episodes has passed its threshold; the run stops on that condition, and the step cap
is only the failure bound.

Thresholds, set from seeds 0-2 of the config: Pendulum passed −250 at 8.1k, 11.3k and 8.1k of
its own env steps and CartPole 150 at 5.6k, 6.0k and 5.7k (exploring policy); the cap, 24k per
task, is twice the slowest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mtrl.actors.protocol import UnrollInfo
from mtrl.config import load_config
from mtrl.plugins import get_plugins
from mtrl.train.trainer import Trainer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

CONFIG = Path(__file__).parents[2] / "configs" / "sac_pendulum_cartpole.yaml"
THRESHOLDS = {"gymnasium/Pendulum-v1": -250.0, "gymnasium/CartPole-v1": 150.0}
CAP_PER_TASK = 24_000


class _Watch(Trainer):
    """Notes the env steps at which each task's last 20 returns first average its threshold,
    and stops the run once every task has."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reached: dict[str, int] = {}

    def on_unroll(self, task: int, info: UnrollInfo) -> None:
        name, progress = self.names[task], self.progress[task]
        recent = list(progress.returns)[-20:]
        done = len(recent) == 20 and sum(recent) / 20 >= THRESHOLDS[name]
        if done and name not in self.reached:
            self.reached[name] = progress.env_steps
        if len(self.reached) == len(THRESHOLDS):
            self.request_stop()


def test_sac_learns_pendulum_and_cartpole_in_one_run() -> None:
    plugins = get_plugins()
    cfg = load_config(
        CONFIG, env_ids=plugins.envs.ids(), algorithms=plugins.algorithms.parallel_support()
    )
    cfg = cfg.model_copy(
        update={
            "total_env_steps": CAP_PER_TASK * len(cfg.tasks),
            "stop_at_target": False,
            "tracking": cfg.tracking.model_copy(update={"final_eval_episodes": 0}),
            "checkpoint": cfg.checkpoint.model_copy(update={"enabled": False}),
        }
    )
    trainer = _Watch(cfg, plugins, console=False, write_run_dir=False)
    try:
        trainer.run()
    finally:
        trainer.close()
    steps = [p.env_steps for p in trainer.progress]
    assert trainer.reached.keys() == THRESHOLDS.keys(), (
        f"reached {trainer.reached} within {steps} env steps; last 20 returns: "
        f"{[round(sum(list(p.returns)[-20:]) / 20) for p in trainer.progress]}"
    )
    assert trainer.learner.gradient_steps > 0
