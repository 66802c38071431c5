"""Anakin learns: CartPole on the tensor env, rollout and update on one device."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.anakin import AnakinRunner, train_anakin
from mtrl.config.learner import LearnerConfig, ModelConfig
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import get_plugins, make_env


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One intra-op thread, as the trainer runs (more collapse on a loaded 2-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_cartpole_learns_well_above_random_in_anakin_mode(one_thread: None) -> None:
    """64 copies x 20 steps per update; typically 0.3-0.5M env steps, 4-8 s on one core."""
    torch.manual_seed(0)
    env = make_env("tensor/CartPole-v1", 64, seed=0)
    cfg = LearnerConfig(
        unroll_length=20, learning_rate=2e-3, model=ModelConfig(encoder_dim=64, torso=[64])
    )
    spaces = TaskSpaces(env.single_observation_space, env.single_action_space)
    model = MultiTaskModel([spaces], cfg.model)
    learner = ImpalaLearner(model, cfg, ["cartpole"])
    result = train_anakin(
        [AnakinRunner(0, env, cfg.unroll_length, reward_scale=1.0)],
        learner,
        total_env_steps=1_200_000,
        target_return=250.0,
        recent=50,
    )
    random_score = get_plugins().envs.get("tensor/CartPole-v1").random_score
    mean = result.mean_recent_return()
    assert mean is not None and mean >= 150.0 > 5 * random_score, (
        f"mean return of the last 50 episodes {mean} after {result.env_steps} env steps"
    )
    assert result.updates == result.env_steps // (64 * 20)
