"""The scheduler in serial mode: with ``progress`` a solved task steps less often than one far
from its target (turns in the one thread, not actors); with ``fixed`` every task steps equally,
as the serial pool always has."""

from __future__ import annotations

import pytest

from mtrl.config import parse_config
from mtrl.train.trainer import Trainer

pytestmark = pytest.mark.timeout(180)


def _env_steps(policy: str) -> list[int]:
    """Env steps per task after a 60k-step serial run of two CartPoles: ``solved`` (target 5,
    met by every episode) and ``hard`` (target 500)."""
    yaml = f"""
name: turns
seed: 0
total_env_steps: 60000
stop_at_target: false
tasks:
  - {{env: gymnasium/CartPole-v1, name: solved, num_envs: 4, target_score: 5}}
  - {{env: gymnasium/CartPole-v1, name: hard, num_envs: 4, target_score: 500}}
scheduler: {{policy: {policy}, warmup_s: 0, rebalance_every_s: 0.2, progress_window: 60}}
actors: {{mode: serial}}
learner: {{unroll_length: 8, batch_size: 8, model: {{encoder_dim: 16, torso: [16]}}}}
checkpoint: {{enabled: false}}
tracking: {{console: quiet, log_every_s: 1000, csv: false, wandb: {{mode: disabled}}}}
"""
    trainer = Trainer(parse_config(yaml), console=False, write_run_dir=False)
    try:
        trainer.run()
    finally:
        trainer.close()
    return [p.env_steps for p in trainer.progress]


def test_progress_gives_the_solved_task_fewer_turns() -> None:
    solved, hard = _env_steps("progress")
    # progress' floor keeps the solved task at >= 1/4 of its weight share; its priority (gap 0,
    # only its learning speed) puts it near 0.3 of the data once decisions start.
    assert 0.15 * (solved + hard) < solved < 0.45 * (solved + hard), (solved, hard)


def test_fixed_steps_every_task_equally() -> None:
    solved, hard = _env_steps("fixed")
    assert solved == hard
