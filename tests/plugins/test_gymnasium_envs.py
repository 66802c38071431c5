"""The gymnasium built-in passes the conformance suite on each kind of env it wraps."""

from __future__ import annotations

import numpy as np
import pytest

from mtrl.plugins import make_env
from mtrl.testing import check_env


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("gymnasium/CartPole-v1", {}),  # native numpy-batched vector env
        ("gymnasium/Pendulum-v1", {}),  # sync vector env, Box actions
        ("gymnasium/MountainCarContinuous-v0", {"max_episode_steps": 50}),
        ("gymnasium/Acrobot-v1", {"max_episode_steps": 50}),
        ("gymnasium/ALE/Breakout-v5", {"max_num_frames_per_episode": 400}),  # ALE vector env
        ("gymnasium/HalfCheetah-v5", {"max_episode_steps": 40}),  # MuJoCo
        ("gymnasium/FrozenLake-v1", {}),  # Discrete observations
    ],
)
def test_conformance(env_id: str, kwargs: dict) -> None:
    report = check_env(env_id, env_kwargs=kwargs, steps=200)
    assert report.episode_ends > 0
    assert {"build", "spaces", "auto-reset", "seeding", "spawn"} <= set(report.checks)


def test_atari_uses_native_preprocessing() -> None:
    env = make_env("gymnasium/ALE/Pong-v5", num_envs=2, seed=0)
    try:
        obs = env.reset()
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        out = env.step(np.zeros(2, dtype=np.int64))
        assert out.reward.dtype == np.float32  # ALE gives int32; the adapter casts
    finally:
        env.close()


def test_truncation_is_kept_apart_from_termination() -> None:
    env = make_env("gymnasium/Pendulum-v1", num_envs=3, seed=0, max_episode_steps=5)
    env.reset()
    flags = [env.step(np.zeros((3, 1), np.float32)) for _ in range(5)]
    assert not any(f.terminated.any() for f in flags)
    assert flags[-1].truncated.all() and not any(f.truncated.any() for f in flags[:-1])
    env.close()


def test_vectorization_choice_is_validated() -> None:
    with pytest.raises(ValueError, match="vectorization must be"):
        make_env("gymnasium/CartPole-v1", num_envs=2, vectorization="threads")
