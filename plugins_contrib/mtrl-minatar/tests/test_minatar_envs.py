"""Tests of mtrl-minatar: contract conformance, truncation, seeding and the action mapping."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("mtrl_minatar") is None:  # pragma: no cover - install hint
    pytest.skip(
        "mtrl-minatar is not installed: pip install -e plugins_contrib/mtrl-minatar",
        allow_module_level=True,
    )

import minatar
from mtrl_minatar.env import GAMES, MinAtarBatchEnv

from mtrl.plugins import get_plugins, make_env
from mtrl.testing import check_env

GAME_IDS = [f"minatar/{g}" for g in sorted(GAMES)]


def test_entry_point_is_discovered() -> None:
    info = get_plugins().infos["minatar"]
    assert info.status == "ok", info.errors
    assert info.package == "mtrl-minatar"
    assert sorted(info.envs) == GAME_IDS
    spec = get_plugins().envs.get("minatar/breakout")
    assert spec.stochastic is True
    assert spec.max_episode_steps == 10_000


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_conformance(env_id: str) -> None:
    report = check_env(env_id, num_envs=3, steps=200, env_kwargs={"max_episode_steps": 40})
    assert report.episode_ends > 0
    assert "spawn" in report.checks


@pytest.mark.parametrize("game", sorted(GAMES))
def test_observation_is_channel_first_binary_uint8(game: str) -> None:
    env = make_env(f"minatar/{game}", num_envs=2, seed=0)
    obs = env.reset()
    channels = GAMES[game][0]
    assert obs.shape == (2, channels, 10, 10) and obs.dtype == np.uint8
    assert set(np.unique(obs)) <= {0, 1}
    assert obs.any()  # something is drawn on every game's first frame


def test_matches_raw_minatar_step_for_step() -> None:
    """Copy i is MinAtar seeded with seed+i, with actions mapped through the minimal set."""
    seed, steps = 11, 300
    env = MinAtarBatchEnv("seaquest", 2, seed, max_episode_steps=None)
    raw = minatar.Environment("seaquest", sticky_action_prob=0.1)
    raw.seed(seed + 1)
    raw.reset()
    minimal = raw.minimal_action_set()
    rng = np.random.default_rng(0)
    obs = env.reset()
    np.testing.assert_array_equal(obs[1], raw.state().transpose(2, 0, 1))
    for _ in range(steps):
        a = rng.integers(0, len(minimal), 2)
        out = env.step(a)
        r, done = raw.act(minimal[a[1]])
        np.testing.assert_array_equal(out.obs[1], raw.state().transpose(2, 0, 1))
        assert out.reward[1] == r and out.terminated[1] == done
        if done:
            break


def test_action_map_is_the_minimal_set() -> None:
    for game in GAMES:
        env = MinAtarBatchEnv(game, 1, 0)
        expected = minatar.Environment(game).minimal_action_set()
        assert env.action_map.tolist() == expected
        assert env.single_action_space.n == len(expected)
    # Breakout's minimal set is (noop, left, right): index 2 must move the paddle right.
    env = MinAtarBatchEnv("breakout", 3, 0, sticky_action_prob=0.0)
    paddle = env.reset()[:, 0, 9, :].argmax(axis=1)
    moved = env.step(np.array([0, 1, 2])).obs[:, 0, 9, :].argmax(axis=1)
    np.testing.assert_array_equal(moved - paddle, [0, -1, 1])


def test_truncation_at_max_episode_steps() -> None:
    """Freeway never ends before 2500 frames, so a 7-step limit must truncate, not terminate."""
    env = MinAtarBatchEnv("freeway", 4, 3, max_episode_steps=7)
    first = env.reset()
    for t in range(1, 8):
        out = env.step(np.ones(4, dtype=np.int64))
        assert not out.terminated.any()
        assert out.truncated.all() == (t == 7) and out.truncated.any() == (t == 7)
    reset_step = env.step(np.ones(4, dtype=np.int64))
    assert not (reset_step.terminated.any() or reset_step.truncated.any())
    assert (reset_step.reward == 0).all()
    # the chicken is back at the bottom row, like at the first reset
    np.testing.assert_array_equal(reset_step.obs[:, 0], first[:, 0])


def test_termination_is_never_also_truncation() -> None:
    noop = np.zeros(1, np.int64)
    env = MinAtarBatchEnv("breakout", 1, 0, sticky_action_prob=0.0, max_episode_steps=None)
    env.reset()
    length = 1
    while not env.step(noop).terminated[0]:  # a deterministic game: noops until the ball drops
        length += 1
    env = MinAtarBatchEnv("breakout", 1, 0, sticky_action_prob=0.0, max_episode_steps=length)
    env.reset()
    for _ in range(length):
        out = env.step(noop)
    assert out.terminated[0] and not out.truncated[0]
    env = MinAtarBatchEnv("breakout", 8, 0, max_episode_steps=12)
    env.reset()
    rng = np.random.default_rng(1)
    ends = {"terminated": 0, "truncated": 0}
    for _ in range(300):
        out = env.step(rng.integers(0, 3, 8))
        assert not (out.terminated & out.truncated).any()
        ends["terminated"] += int(out.terminated.sum())
        ends["truncated"] += int(out.truncated.sum())
    assert ends["terminated"] > 0 and ends["truncated"] > 0


def _trajectory(seed: int, num_envs: int, copy_actions: np.ndarray) -> list[np.ndarray]:
    env = MinAtarBatchEnv("asterix", num_envs, seed, max_episode_steps=30)
    frames = [env.reset()[-1]]
    for a in copy_actions:
        out = env.step(np.full(num_envs, a))
        frames.append(
            np.concatenate(
                [out.obs[-1].ravel(), [out.reward[-1], out.terminated[-1], out.truncated[-1]]]
            )
        )
    return frames


def test_same_seed_same_trajectory_and_copy_i_uses_seed_plus_i() -> None:
    actions = np.random.default_rng(5).integers(0, 5, 150)
    a = _trajectory(7, 3, actions)
    b = _trajectory(7, 3, actions)
    c = _trajectory(9, 1, actions)  # copy 2 of seed 7 is copy 0 of seed 9
    d = _trajectory(8, 1, actions)
    for x, y, z in zip(a, b, c, strict=True):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(x, z)
    assert any(not np.array_equal(x, w) for x, w in zip(a, d, strict=True))


def test_bad_actions_are_rejected() -> None:
    env = MinAtarBatchEnv("breakout", 2, 0)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(2, dtype=np.int64))
    env.reset()
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        env.step(np.array([0, 3]))
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="unknown MinAtar game"):
        MinAtarBatchEnv("pong", 1, 0)


def test_outputs_are_copies_unless_asked() -> None:
    env = MinAtarBatchEnv("breakout", 1, 0)
    first = env.reset()
    out = env.step(np.array([2]))
    assert not np.shares_memory(first, out.obs)
    env = MinAtarBatchEnv("breakout", 1, 0, copy=False)
    assert np.shares_memory(env.reset(), env.step(np.array([2])).obs)
