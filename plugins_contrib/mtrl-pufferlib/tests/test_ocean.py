"""PufferLib's Ocean CartPole through mtrl: the batch-env conformance suite, and the adapter's
two repairs — the step after an end is a reset step, and the C env's silent step limit is a
truncation — checked on the real C env with a controller that balances the pole."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pufferlib.ocean.environment", reason="needs PufferLib's Ocean envs")

from mtrl.plugins import get_plugins
from mtrl.testing.conformance import check_env


def test_ocean_cartpole_passes_the_conformance_suite() -> None:
    report = check_env("pufferlib/cartpole", num_envs=4, steps=400)
    assert report.episode_ends > 0
    assert {"build", "trainable", "spaces", "auto-reset", "seeding", "spawn"} <= set(report.checks)


def _balance(obs: np.ndarray) -> np.ndarray:
    """Push towards where the pole falls: keeps Ocean's pole up for its 200 steps."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def test_the_step_limit_is_a_truncation_and_the_next_step_a_reset_step() -> None:
    env = get_plugins().envs.get("pufferlib/cartpole").build(num_envs=3, seed=5)
    try:
        obs = env.reset()
        ends, rewards = [], []
        for t in range(1, 651):
            out = env.step(_balance(obs))
            obs = out.obs
            assert not out.terminated.any(), f"the controller dropped the pole at step {t}"
            rewards.append(out.reward)
            if out.truncated.any():
                assert out.truncated.all(), "the copies started together, they end together"
                ends.append(t)
        assert ends == [200, 400, 600]  # the C env's MAX_STEPS, and 200 more after each reset
        r = np.stack(rewards)  # [650, 3]
        np.testing.assert_array_equal(r[199], 0.0)  # Ocean's own reward on its last step
        np.testing.assert_array_equal(r[200], 0.0)  # the reset step
        np.testing.assert_array_equal(r[[201, 401, 601]], 1.0)  # then the new episode's
        assert r[:200, 0].sum() == 199  # the first episode: every step but the last
        assert r[200:400, 0].sum() == 198  # later ones: the reset step's reward left out too
    finally:
        env.close()


def test_a_multi_agent_ocean_env_is_refused() -> None:
    from mtrl_pufferlib.env import OceanBatchEnv

    with pytest.raises(ValueError, match="8 agents in 2 envs; only single-agent"):
        OceanBatchEnv("rware", 2, 0)  # four robots per warehouse
