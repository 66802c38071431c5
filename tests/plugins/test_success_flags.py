"""Success flags: a gymnasium env's ``info["success"]`` reaches the batch env, the actors'
episode accounting (an episode succeeds if any step does) and the evaluation."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from mtrl.actors.runner import SerialActor
from mtrl.plugins import EnvSpec, batch_env_from_gymnasium
from mtrl.plugins.adapters import success_flags
from mtrl.testing import check_env
from mtrl.train.evaluate import run_episodes


class Walk(gym.Env):
    """A walk on 0..6 from 3: action 1 steps right, 0 left; ``success`` while at 6 (the walk
    goes on: a success that is not an episode end); the episode ends after ``horizon``."""

    observation_space = gym.spaces.Box(0.0, 6.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, horizon: int = 8) -> None:
        self.horizon, self.pos, self.t = horizon, 3, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.pos, self.t = 3, 0
        return np.array([self.pos], np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.pos = int(np.clip(self.pos + (1 if action else -1), 0, 6))
        self.t += 1
        obs = np.array([self.pos], np.float32)
        return obs, float(self.pos == 6), False, self.t >= self.horizon, {"success": self.pos == 6}


def test_gymnasium_vector_info_becomes_per_copy_flags_with_its_mask() -> None:
    info = {"success": np.array([True, True, False]), "_success": np.array([True, False, True])}
    assert success_flags(info, 3).tolist() == [True, False, False]
    assert success_flags({"is_success": np.array([0.0, 1.0])}, 2).tolist() == [False, True]
    assert success_flags({"other": 1}, 2) is None


def test_episodes_that_reach_the_goal_count_as_successes_in_training_and_eval() -> None:
    env = batch_env_from_gymnasium(lambda: Walk(horizon=8), num_envs=2, seed=0)
    # Copy 0 always steps right (at 6 from step 3 on: success), copy 1 always left (never).
    actor = SerialActor(0, env, unroll_length=20, reward_scale=1.0)

    def act(buf: Any, t: int) -> None:
        buf.actions[t] = [1, 0]

    actor.collect(act)
    returns, lengths, successes = actor.stepper.episodes.drain()
    # 20 steps of two copies: each finishes 2 episodes of 8 steps (step 9 is a reset step).
    assert lengths == [8, 8, 8, 8]
    assert successes == [True, False, True, False]
    assert returns == [6.0, 0.0, 6.0, 0.0]
    actor.close()

    def policy(task: int, obs: Any, valid: Any) -> tuple[None, np.ndarray, None]:
        return None, (obs[:, 0] >= 3).astype(np.int64), None  # right from the start: succeeds

    env = batch_env_from_gymnasium(lambda: Walk(horizon=8), num_envs=2, seed=1)
    finished = run_episodes(env, policy, 0, episodes=4, max_steps=1000)
    env.close()
    assert finished.successes == [True] * 4 and len(finished.returns) == 4


def test_an_env_that_reports_success_passes_the_conformance_suite() -> None:
    spec = EnvSpec(
        id="walk/Walk-v0",
        make=lambda num_envs, seed=0: batch_env_from_gymnasium(Walk, num_envs, seed),
        plugin="walk",
    )
    env = spec.build(num_envs=2, seed=0)
    env.reset()
    out = env.step(np.array([1, 1]))
    assert out.success is not None and out.success.dtype == np.bool_
    env.close()
    check_env(spec, spawn=False)
