"""One copy of a registered mtrl env as a gymnasium env (mtrl.plugins.SingleCopyEnv): the same
episodes as gymnasium's own env, gymnasium's checker passes, and an ended episode is started
again by the caller's reset, not by a hidden step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

from mtrl.plugins import SingleCopyEnv


def test_cartpole_through_mtrl_plays_gymnasiums_own_episodes() -> None:
    ours, theirs = SingleCopyEnv("gymnasium/CartPole-v1", seed=3), gym.make("CartPole-v1")
    obs, _ = ours.reset(seed=3)
    ref, _ = theirs.reset(seed=3)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(300):
        np.testing.assert_allclose(obs, ref)
        action = int(rng.integers(2))
        obs, reward, terminated, truncated, _ = ours.step(action)
        ref, ref_reward, ref_terminated, ref_truncated, _ = theirs.step(action)
        assert (reward, terminated, truncated) == (ref_reward, ref_terminated, ref_truncated)
        if terminated or truncated:
            ends += 1
            obs, _ = ours.reset(seed=100 + ends)
            ref, _ = theirs.reset(seed=100 + ends)
    assert ends >= 3
    ours.close()


def test_a_contrib_simulation_passes_gymnasiums_checker_and_ends_on_time() -> None:
    env = SingleCopyEnv("scisim/heat1d", seed=0, horizon=5)
    check_env(env, skip_render_check=True)
    env.reset()
    flags = [env.step(env.action_space.sample())[3] for _ in range(5)]
    assert flags == [False] * 4 + [True]
    first, _ = env.reset()
    assert first[-1] == 0.0  # the elapsed fraction of the horizon starts again
    env.close()
