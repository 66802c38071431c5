"""The scheduler in serial mode: a policy's data shares become turns in the one thread. A
third-party policy asking for 1:4 gets exactly that split of env steps; ``progress`` runs end
to end and hands its shares to the pool and the share gate; ``fixed`` steps every task equally,
as the serial pool always has."""

from __future__ import annotations

import types

import numpy as np
import pytest

from mtrl.config import parse_config
from mtrl.plugins import Plugins, hookimpl, load_plugins
from mtrl.scheduler import Allocation
from mtrl.train.trainer import Trainer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _one_to_four(records, budget):
    """One actor each (serial mode has no others to hand out), data shares 1:4."""
    names = [r.name for r in records]
    return Allocation({n: 1 for n in names}, shares=dict(zip(names, (0.2, 0.8), strict=True)))


def _plugins() -> Plugins:
    def register(register):
        register.policy("one_to_four", _one_to_four, description="a fifth to the first task")

    plugin = types.SimpleNamespace(mtrl_register_schedulers=hookimpl(register))
    return load_plugins(extra={"turns_test": plugin})


def _run(policy: str, plugins: Plugins) -> Trainer:
    """A closed trainer after a 40k-step serial run of two CartPoles: ``solved`` (target 5,
    met by every episode) and ``hard`` (target 500)."""
    yaml = f"""
name: turns
seed: 0
total_env_steps: 40000
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
    cfg = parse_config(yaml, scheduler_policies=plugins.schedulers.names())
    trainer = Trainer(cfg, plugins, console=False, write_run_dir=False)
    try:
        trainer.run()
    finally:
        trainer.close()
    return trainer


def test_a_policys_shares_become_the_split_of_env_steps() -> None:
    trainer = _run("one_to_four", _plugins())
    solved, hard = (p.env_steps for p in trainer.progress)
    # From the first decision on, turns go 1:4; the run ends within one round of its budget.
    assert abs(solved / (solved + hard) - 0.2) < 0.01, (solved, hard)
    np.testing.assert_allclose(trainer.queue.gate.targets, [0.2, 0.8])


def test_progress_hands_its_shares_to_the_pool_and_the_gate() -> None:
    trainer = _run("progress", load_plugins())
    targets = trainer.queue.gate.targets
    assert np.isfinite(targets).all() and abs(targets.sum() - 1.0) < 1e-6, targets
    solved, hard = (p.env_steps for p in trainer.progress)
    assert solved != hard  # turns followed the shares, not one each
    # progress keeps every task at >= a quarter of its weight share
    assert solved > 0.1 * (solved + hard) and hard > 0.1 * (solved + hard)


def test_fixed_steps_every_task_equally() -> None:
    solved, hard = (p.env_steps for p in _run("fixed", load_plugins()).progress)
    assert solved == hard
