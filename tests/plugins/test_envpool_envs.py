"""The envpool built-in: registration, conformance, native auto-reset, async send/recv, errors."""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest

from mtrl.errors import EnvKwargsError
from mtrl.plugins import AsyncBatchEnv, get_plugins, load_plugins, make_env
from mtrl.plugins.builtin.envpool_envs import make_envpool
from mtrl.testing import check_env

pytest.importorskip("envpool")


def test_registers_atari_classic_and_mujoco_without_aliases() -> None:
    info = get_plugins().infos["envpool"]
    assert info.status == "ok", info.errors
    ids = set(info.envs)
    assert {"envpool/Pong-v5", "envpool/CartPole-v1", "envpool/HalfCheetah-v4"} <= ids
    assert not any(i.count("/") > 1 for i in ids)  # phys2d/... aliases are skipped
    envs = get_plugins().envs
    families = {envs.get(i).description.rsplit(" ", 1)[1] for i in ids}
    assert families == {"(atari)", "(classic_control)", "(mujoco)"}
    pong, cartpole = envs.get("envpool/Pong-v5"), envs.get("envpool/CartPole-v1")
    assert (pong.random_score, pong.reference_score) == (-20.7, 14.6)
    assert pong.max_episode_steps == 27000
    assert pong._observation_space is not None  # declared (atari_spaces): no ROM loaded
    assert pong.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    assert pong.action_space == gym.spaces.Discrete(6)
    assert (cartpole.random_score, cartpole.reference_score, cartpole.max_episode_steps) == (
        22.0,
        475.0,
        500,
    )
    assert cartpole.stochastic is False


@pytest.mark.parametrize(
    ("env_id", "kwargs", "num_envs"),
    [
        ("envpool/CartPole-v1", {}, 3),
        ("envpool/Pong-v5", {"max_episode_steps": 60}, 3),
        ("envpool/HalfCheetah-v4", {"max_episode_steps": 80}, 3),
        ("envpool/CartPole-v1", {"batch_size": 2, "max_episode_steps": 20}, 4),  # async path
    ],
)
def test_conformance(env_id: str, kwargs: dict, num_envs: int) -> None:
    report = check_env(env_id, num_envs=num_envs, env_kwargs=kwargs)
    assert {"build", "spaces", "auto-reset", "seeding", "spawn"} <= set(report.checks)


def test_native_auto_reset_is_the_next_step_rule() -> None:
    """Truncation at the time limit, termination when the pole falls; each followed by a reset."""
    with make_env("envpool/CartPole-v1", 2, seed=0, max_episode_steps=30) as env:
        env.reset()
        done_seen = {"terminated": 0, "truncated": 0}
        prev_done = np.zeros(2, dtype=bool)
        actions = np.array([0, 1])  # copy 0 pushes left forever; copy 1 alternates below
        for t in range(120):
            actions[1] = t % 2
            out = env.step(actions)
            assert out.reward.dtype == np.float32 and out.terminated.dtype == np.bool_
            assert not (out.terminated & out.truncated).any()
            assert (out.reward[prev_done] == 0).all()
            assert not (out.terminated | out.truncated)[prev_done].any()
            done_seen["terminated"] += int(out.terminated.sum())
            done_seen["truncated"] += int(out.truncated.sum())
            prev_done = out.terminated | out.truncated
        assert done_seen["terminated"] and done_seen["truncated"]


def test_the_step_after_an_episode_end_is_a_reset_not_a_move() -> None:
    """With a 5-step limit, truncations come every 6 steps: 5 moves, then the reset step."""
    with make_env("envpool/CartPole-v1", 1, seed=0, max_episode_steps=5) as env:
        env.reset()
        ends = [t for t in range(18) if env.step(np.array([t % 2])).truncated[0]]
    assert ends == [4, 10, 16]


def test_copy_i_is_seeded_with_seed_plus_i() -> None:
    with (
        make_env("envpool/CartPole-v1", 3, seed=5) as a,
        make_env("envpool/CartPole-v1", 1, seed=7) as b,
    ):
        np.testing.assert_array_equal(a.reset()[2], b.reset()[0])


def test_async_send_recv_covers_every_copy_and_matches_sync() -> None:
    """Every copy reports through recv; per copy the rule holds and the trajectory is sync's."""
    n, batch, steps = 6, 2, 30
    kwargs = {"max_episode_steps": 4}

    def action(i: int, k: int) -> int:  # the action copy i takes at its k-th step
        return (i + k // 3) % 2

    with make_env("envpool/CartPole-v1", n, seed=3, **kwargs) as sync:
        want = {i: [(obs, 0.0, False, False)] for i, obs in enumerate(sync.reset())}
        for k in range(steps):
            out = sync.step(np.array([action(i, k) for i in range(n)]))
            for i in range(n):
                want[i].append((out.obs[i], out.reward[i], out.terminated[i], out.truncated[i]))

    env = make_env("envpool/CartPole-v1", n, seed=3, batch_size=batch, **kwargs)
    assert isinstance(env, AsyncBatchEnv) and env.batch_size == batch
    got: dict[int, list] = {i: [] for i in range(n)}
    try:
        env.async_reset()
        first_ids = []
        for _ in range(n // batch):  # the reset results: every copy exactly once
            ids, part = env.recv()
            assert part.obs.shape == (batch, 4) and part.reward.shape == (batch,)
            assert (part.reward == 0).all() and not (part.terminated | part.truncated).any()
            first_ids += ids.tolist()
            for row, i in enumerate(ids):
                got[i].append((part.obs[row], part.reward[row], False, False))
            env.send(np.array([action(i, 0) for i in ids]), ids)
        assert sorted(first_ids) == list(range(n))
        while max(len(g) for g in got.values()) <= steps:
            ids, part = env.recv()
            assert part.obs.shape == (batch, 4) and part.terminated.dtype == np.bool_
            for row, i in enumerate(ids):
                got[i].append(
                    (part.obs[row], part.reward[row], part.terminated[row], part.truncated[row])
                )
            env.send(np.array([action(i, len(got[i]) - 1) for i in ids]), ids)
    finally:
        env.close()
    for i in range(n):
        assert len(got[i]) > steps // 2  # every copy kept stepping
        ends = 0
        for t, (g, w) in enumerate(zip(got[i], want[i], strict=False)):
            np.testing.assert_array_equal(g[0], w[0], err_msg=f"copy {i} step {t}")
            assert tuple(map(float, g[1:])) == tuple(map(float, w[1:])), (i, t)
            if (g[2] or g[3]) and t + 1 < len(got[i]):  # next-step rule, per copy
                ends += 1
                assert got[i][t + 1][1] == 0 and not any(got[i][t + 1][2:]), (i, t)
        assert ends


def test_async_whole_batch_calls_refuse_while_copies_are_in_flight() -> None:
    with make_env("envpool/CartPole-v1", 4, seed=0, batch_size=2) as env:
        assert env.reset().shape == (4, 4)
        out = env.step(np.zeros(4, dtype=np.int64))
        assert out.obs.shape == (4, 4) and out.reward.shape == (4,)
        with pytest.raises(RuntimeError, match="would block forever"):
            env.recv()
        env.send(np.zeros(2, dtype=np.int64), np.array([0, 1]))
        with pytest.raises(RuntimeError, match="await recv"):
            env.step(np.zeros(4, dtype=np.int64))
        env.recv()


def test_cartpole_spaces_agree_with_gymnasium() -> None:
    spec = get_plugins().envs.get("envpool/CartPole-v1")
    ref = gym.make("CartPole-v1")
    assert spec.observation_space == ref.observation_space
    assert spec.action_space == ref.action_space
    with make_env("envpool/CartPole-v1", 2) as env:
        assert env.single_observation_space == ref.observation_space


def test_unknown_option_names_the_env_and_suggests() -> None:
    with pytest.raises(EnvKwargsError, match=r"envpool/CartPole-v1.*max_episode_steps"):
        make_env("envpool/CartPole-v1", 2, max_episode_step=10)
    with pytest.raises(TypeError, match="envpool/Pong-v5: unknown option 'bogus'"):
        make_envpool(2, task="Pong-v5", bogus=1)


def test_batch_size_must_divide_num_envs() -> None:
    with pytest.raises(ValueError, match="envpool/CartPole-v1: batch_size"):
        make_env("envpool/CartPole-v1", 5, batch_size=2)


def test_missing_envpool_makes_the_plugin_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "envpool", None)  # import envpool -> ImportError
    info = load_plugins(autoload=False).infos["envpool"]
    assert info.status == "unavailable"
    assert "pip install 'mtrl[envpool]'" in info.errors[0]
