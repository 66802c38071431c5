"""The ``tensor`` built-in: gymnasium parity of dynamics, the batch-env contract, the tensor API."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from mtrl.plugins import get_plugins, make_env
from mtrl.plugins.builtin.tensor_envs import ENVS, env_class
from mtrl.plugins.builtin.tensor_envs.base import TensorBatchEnv
from mtrl.testing import check_env

NAMES = list(ENVS)
PI = math.pi

#: Per env: uniform ranges of random physical states for the parity test. They cover the
#: reachable states and a margin past the termination thresholds, walls and speed clips.
STATE_RANGES: dict[str, list[tuple[float, float]]] = {
    "CartPole-v1": [(-2.6, 2.6), (-3.0, 3.0), (-0.25, 0.25), (-3.5, 3.5)],
    "Acrobot-v1": [(-PI, PI), (-PI, PI), (-4 * PI, 4 * PI), (-9 * PI, 9 * PI)],
    "Pendulum-v1": [(-2 * PI, 2 * PI), (-8.0, 8.0)],
    "MountainCar-v0": [(-1.2, 0.6), (-0.07, 0.07)],
    "MountainCarContinuous-v0": [(-1.2, 0.6), (-0.07, 0.07)],
}
#: |ours - gymnasium| bounds on the next physical state in float64 mode. MountainCarContinuous
#: keeps its state in float32 in gymnasium (so do we) with float32 intermediates there.
STATE_ATOL_F64 = {"MountainCarContinuous-v0": 1e-6}
TERMINATING = {"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0"}


def _random_states(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    lo, hi = np.array(STATE_RANGES[name]).T
    states = rng.uniform(lo, hi, size=(n, len(lo)))
    if name.startswith("MountainCar"):  # the left wall, and the goal line
        states[: n // 8] = [-1.2, -0.01]
        states[n // 8 : n // 4, 0] = rng.uniform(0.4, 0.6, n // 8)
        states[n // 8 : n // 4, 1] = rng.uniform(0.0, 0.07, n // 8)
    return states


def _gym_step(env: gym.Env, state: np.ndarray, action: np.ndarray) -> tuple:
    env.state = state.copy()
    if hasattr(env, "steps_beyond_terminated"):  # CartPole: as if freshly reset
        env.steps_beyond_terminated = None
    obs, reward, terminated, _, _ = env.step(action if action.shape else int(action))
    return np.asarray(env.state, np.float64), obs, float(reward), bool(terminated)


def _parity(name: str, dtype: str, n: int, chain: int, seed: int) -> dict[str, float]:
    """Step ours and gymnasium's from identical random states with identical random actions,
    ``chain`` steps in a row (each side continuing from its own state); return the worst gaps.
    """
    rng = np.random.default_rng(seed)
    ours = env_class(name)(n, seed, dtype=dtype, max_episode_steps=10_000)
    ref = gym.make(name).unwrapped
    ref.reset(seed=seed)
    ref.action_space.seed(seed)
    ref_states = _random_states(name, n, rng)
    ours.set_state(ref_states)
    worst = {"state": 0.0, "obs": 0.0, "reward": 0.0, "terminations": 0}
    for _ in range(chain):
        actions = np.stack([ref.action_space.sample() for _ in range(n)])
        out = ours.step(actions)
        alive = ~out.terminated
        for i in range(n):
            state, obs, reward, terminated = _gym_step(ref, ref_states[i], actions[i])
            assert terminated == out.terminated[i], f"{name}: termination differs, copy {i}"
            ref_states[i] = state
            gap = np.abs(obs - out.obs[i]) / (1.0 + np.abs(obs))
            worst["obs"] = max(worst["obs"], float(gap.max()))
            worst["reward"] = max(worst["reward"], abs(reward - float(out.reward[i])))
        got = ours.get_state()["state"].double().numpy()
        worst["state"] = max(worst["state"], float(np.abs(got - ref_states).max()))
        worst["terminations"] += int(out.terminated.sum())
        # Each side goes on from its own state; terminated copies restart from fresh states.
        fresh = _random_states(name, n, rng)
        ref_states[~alive] = fresh[~alive]
        got[~alive] = fresh[~alive]
        ours.set_state(got)
    return worst


@pytest.mark.parametrize("name", NAMES)
def test_dynamics_match_gymnasium_in_float64(name: str) -> None:
    worst = _parity(name, "float64", n=48, chain=12, seed=1)
    assert worst["state"] <= STATE_ATOL_F64.get(name, 1e-12), worst
    assert worst["obs"] <= 1e-6, worst  # float32 observations: one rounding apart at most
    assert worst["reward"] <= 2e-5, worst  # ours are float32 (up to ~100 in size)
    if name in TERMINATING:
        assert worst["terminations"] > 0, f"{name}: the parity test never terminated"


@pytest.mark.parametrize("name", NAMES)
def test_dynamics_match_gymnasium_in_float32(name: str) -> None:
    worst = _parity(name, "float32", n=32, chain=4, seed=2)
    assert worst["state"] <= 1e-4 * (1 + 9 * PI), worst
    assert worst["obs"] <= 1e-4, worst
    assert worst["reward"] <= 1e-3, worst


@pytest.mark.parametrize("name", NAMES)
def test_spaces_scores_and_time_limits_match_gymnasium(name: str) -> None:
    spec = get_plugins().envs.get(f"tensor/{name}")
    ref = gym.make(name)
    assert spec.plugin == "tensor"
    assert spec.observation_space == ref.observation_space
    assert spec.action_space == ref.action_space
    assert spec.max_episode_steps == ref.spec.max_episode_steps
    assert env_class(name).default_max_episode_steps == ref.spec.max_episode_steps
    assert spec.random_score is not None and spec.reference_score is not None
    assert spec.stochastic is False


@pytest.mark.parametrize(
    ("name", "kwargs", "spawn"),
    [
        ("CartPole-v1", {}, True),
        ("Acrobot-v1", {"max_episode_steps": 40}, False),
        ("Pendulum-v1", {"max_episode_steps": 40}, False),
        ("MountainCar-v0", {"max_episode_steps": 40}, False),
        ("MountainCarContinuous-v0", {"max_episode_steps": 40, "dtype": "float64"}, False),
    ],
)
def test_conformance(name: str, kwargs: dict, spawn: bool) -> None:
    report = check_env(f"tensor/{name}", env_kwargs=kwargs, steps=120, spawn=spawn)
    assert {"build", "spaces", "auto-reset", "seeding", "close"} <= set(report.checks)
    assert ("spawn" in report.checks) == spawn


def test_truncation_at_gymnasiums_step_count() -> None:
    """Pendulum never terminates: both truncate at step 200, then ours takes a reset step."""
    ours = make_env("tensor/Pendulum-v1", num_envs=2, seed=0)
    ref = gym.make("Pendulum-v1")
    ours.reset()
    ref.reset(seed=0)
    zero = np.zeros((2, 1), np.float32)
    for t in range(1, 201):
        out = ours.step(zero)
        _, _, term, trunc, _ = ref.step(zero[0])
        assert not out.terminated.any() and not term
        assert out.truncated.all() == trunc == (t == 200), t
    reset = ours.step(zero)
    assert not reset.truncated.any() and (reset.reward == 0).all()
    assert ours.get_state()["steps"].tolist() == [0, 0]
    # the next episode is 200 steps long again
    flags = [ours.step(zero).truncated.all() for _ in range(200)]
    assert flags[-1] and not any(flags[:-1])


def test_auto_reset_is_next_step() -> None:
    """After termination the next step ignores the action, starts afresh: reward 0, no flags."""
    env = env_class("CartPole-v1")(3, seed=0)
    env.reset()
    env.set_state(np.array([[2.399, 5.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.2, 5.0]]))
    push = np.ones(3, np.int64)
    end = env.step(push)
    assert end.terminated.tolist() == [True, False, True]
    assert end.reward.tolist() == [1.0, 1.0, 1.0]  # CartPole rewards the terminal step too
    assert end.obs[0, 0] > 2.4  # the final observation, not a reset one
    after = env.step(push)
    assert after.reward.tolist() == [0.0, 1.0, 0.0]
    assert not after.terminated.any() and not after.truncated.any()
    assert np.abs(after.obs[[0, 2]]).max() <= 0.05  # start states: U(-0.05, 0.05)
    assert env.get_state()["steps"].tolist() == [0, 2, 0]
    assert env.step(push).reward.tolist() == [1.0, 1.0, 1.0]


def test_tensor_api_matches_numpy_api_and_stays_on_device() -> None:
    a = env_class("Acrobot-v1")(5, seed=7)
    b = env_class("Acrobot-v1")(5, seed=7)
    obs_t = a.reset_tensor()
    assert isinstance(obs_t, torch.Tensor) and obs_t.dtype == torch.float32
    np.testing.assert_array_equal(obs_t.numpy(), b.reset())
    gen = np.random.default_rng(0)
    for _ in range(60):
        actions = gen.integers(0, 3, size=5)
        t = a.step_tensor(torch.as_tensor(actions))
        n = b.step(actions)
        for x in t:
            assert isinstance(x, torch.Tensor) and x.device == a.device
        assert t.reward.dtype == torch.float32 and t.terminated.dtype == torch.bool
        np.testing.assert_array_equal(t.obs.numpy(), n.obs)
        np.testing.assert_array_equal(t.reward.numpy(), n.reward)
        np.testing.assert_array_equal(t.truncated.numpy(), n.truncated)


def test_start_states_follow_gymnasiums_ranges_and_seed() -> None:
    env = env_class("MountainCar-v0")(2000, seed=3)
    start = env.reset_tensor()
    assert start[:, 0].min() >= -0.6 and start[:, 0].max() <= -0.4
    assert start[:, 0].std() > 0.05 and (start[:, 1] == 0).all()
    same = env_class("MountainCar-v0")(2000, seed=3).reset_tensor()
    other = env_class("MountainCar-v0")(2000, seed=4).reset_tensor()
    assert torch.equal(start, same) and not torch.equal(start, other)
    pend = env_class("Pendulum-v1")(2000, seed=0)
    pend.reset_tensor()
    th, thdot = pend.get_state()["state"].unbind(-1)
    assert th.abs().max() <= PI and th.abs().max() > 3.0 and thdot.abs().max() <= 1.0


def test_bad_arguments_are_reported() -> None:
    with pytest.raises(ValueError, match="dtype"):
        env_class("CartPole-v1")(2, dtype="float16")
    env = env_class("CartPole-v1")(2)
    env.reset()
    with pytest.raises(ValueError, match="actions must have shape"):
        env.step(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="state must have shape"):
        env.set_state(np.zeros((2, 3)))
    assert isinstance(make_env("tensor/CartPole-v1", 2), TensorBatchEnv)
