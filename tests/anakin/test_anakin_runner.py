"""AnakinRunner: the same TaskBatch as the serial numpy path, device episode stats, mixed runs."""

from __future__ import annotations

import itertools
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from mtrl.actors.inference import InferenceModel
from mtrl.actors.runner import SerialActor
from mtrl.actors.unroll import UnrollBuffer, obs_row
from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.anakin import AnakinRunner, DeviceEpisodeTracker, anakin_train_step
from mtrl.anakin.actions import DeviceActionMap
from mtrl.config.learner import LearnerConfig, ModelConfig
from mtrl.learner.batch import TaskBatch, task_batch
from mtrl.learner.distributions import env_actions_tensor
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import make_env

SMALL = ModelConfig(encoder_dim=32, torso=[32])
FIELDS = ("obs", "actions", "behaviour_logp", "rewards", "terminated", "truncated", "valid")


def _model(*envs: object) -> MultiTaskModel:
    spaces = [TaskSpaces(e.single_observation_space, e.single_action_space) for e in envs]
    return MultiTaskModel(spaces, SMALL)


def _serial_batches(env_id: str, kwargs: dict, model, n: int, seed: int) -> tuple[list, tuple]:
    """The numpy path: the env's numpy API in a SerialActor, actions from InferenceModel."""
    actor = SerialActor(0, make_env(env_id, 6, seed=seed, **kwargs), 8, reward_scale=0.5)
    inference = InferenceModel(model, shared=True)

    def act(buf: UnrollBuffer, t: int) -> None:
        raw, logp, version = inference.act(buf.task, obs_row(buf.obs, t))
        buf.actions[t], buf.behaviour_logp[t], buf.versions[t] = raw, logp, version

    torch.manual_seed(seed)
    out = []
    for v in range(n):
        inference.publish(model, v)
        # kept, not released: the batch's tensors share the buffer's memory
        out.append(task_batch(actor.collect(act), torch.device("cpu")))
    return out, actor.stepper.episodes.drain()


def _anakin_batches(env_id: str, kwargs: dict, model, n: int, seed: int) -> tuple[list, tuple]:
    runner = AnakinRunner(0, make_env(env_id, 6, seed=seed, **kwargs), 8, reward_scale=0.5)
    torch.manual_seed(seed)
    out = [runner.collect(model, v) for v in range(n)]
    assert runner.env_steps == n * 8 * 6
    return out, runner.episodes.drain()


def test_collect_gives_exactly_the_serial_numpy_paths_batches() -> None:
    """Same seeds, same model: identical obs (with the carried bootstrap row), raw actions,
    log-probs, scaled rewards, flags, valid masks, versions and unscaled episode returns."""
    env_id, kwargs = "tensor/CartPole-v1", {"max_episode_steps": 12}  # truncations too
    model = _model(make_env(env_id, 1))
    serial, serial_eps = _serial_batches(env_id, kwargs, model, n=5, seed=3)
    anakin, anakin_eps = _anakin_batches(env_id, kwargs, model, n=5, seed=3)
    for s, a in zip(serial, anakin, strict=True):
        assert isinstance(a, TaskBatch) and a.task == s.task
        assert a.policy_version == s.policy_version
        for f in FIELDS:
            x, y = getattr(s, f), getattr(a, f)
            assert x.dtype == y.dtype and x.shape == y.shape, f
            assert torch.equal(x, y), f
    for prev, nxt in itertools.pairwise(anakin):
        assert torch.equal(prev.obs[-1], nxt.obs[0])  # bootstrap row carried over
    cat = lambda f: torch.cat([getattr(b, f) for b in anakin])  # noqa: E731
    assert cat("truncated").any() and cat("terminated").any() and not cat("valid").all()
    rewards, valid = cat("rewards"), cat("valid")
    assert (rewards[valid] == 0.5).all() and (rewards[~valid] == 0).all()  # scaled; reset: 0
    assert anakin_eps == serial_eps and len(anakin_eps[0]) > 5
    returns, lengths, successes = anakin_eps
    assert successes == []  # CartPole reports no success
    assert all(r == float(n) for r, n in zip(returns, lengths, strict=True))  # unscaled: 1/step


def test_collect_matches_the_serial_path_for_box_actions() -> None:
    """Pendulum: squashing in float32 on the device vs float64 on the host, so close, not equal."""
    env_id = "tensor/Pendulum-v1"
    model = _model(make_env(env_id, 1))
    serial, _ = _serial_batches(env_id, {}, model, n=3, seed=5)
    anakin, _ = _anakin_batches(env_id, {}, model, n=3, seed=5)
    for s, a in zip(serial, anakin, strict=True):
        assert a.actions.dtype == torch.float32 and a.actions.shape == (8, 6, 1)
        for f in ("obs", "actions", "behaviour_logp", "rewards"):
            torch.testing.assert_close(getattr(a, f), getattr(s, f), atol=1e-4, rtol=1e-4)
        assert torch.equal(a.valid, s.valid)


def test_device_episode_tracker_keeps_order_and_bounded_memory() -> None:
    tracker = DeviceEpisodeTracker(num_envs=3, device=torch.device("cpu"), capacity=4)
    done = torch.tensor([[True, False, True], [False, True, False]])
    returns = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    lengths = torch.arange(6).reshape(2, 3) + 10
    tracker.record(done, returns, lengths)
    assert tracker.drain() == ([0.0, 2.0, 4.0], [10, 12, 14], [])  # time-major order
    assert tracker.drain() == ([], [], [])
    for _ in range(2):
        tracker.record(done, returns, lengths)
    # 6 endings into a ring of 4: the oldest two are dropped and counted.
    assert tracker.drain() == ([4.0, 0.0, 2.0, 4.0], [14, 10, 12, 14], [])
    assert tracker.dropped == 2


def test_anakin_and_sebulba_tasks_share_one_update() -> None:
    """Task 0 runs on the device (Anakin), task 1 in a numpy actor; one learner takes both."""
    anakin_env = make_env("tensor/CartPole-v1", 4, seed=0)
    numpy_env = make_env("gymnasium/Pendulum-v1", 3, seed=1)
    model = _model(anakin_env, numpy_env)
    learner = ImpalaLearner(
        model, LearnerConfig(unroll_length=5, model=SMALL), ["cartpole", "pend"]
    )
    runner = AnakinRunner(0, anakin_env, 5, reward_scale=1.0)
    actor = SerialActor(1, numpy_env, 5, reward_scale=0.1)
    inference = InferenceModel(model, shared=True)

    def act(buf: UnrollBuffer, t: int) -> None:
        raw, logp, version = inference.act(buf.task, obs_row(buf.obs, t))
        buf.actions[t], buf.behaviour_logp[t], buf.versions[t] = raw, logp, version

    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(2):
        buf = actor.collect(act)
        metrics = learner.update(
            [runner.collect(model, learner.version), task_batch(buf, learner.device)]
        )
        actor.release(buf)
        inference.publish(model, learner.version)
    # no episode can end in 10 steps of either task: every sample of both tasks is genuine
    assert metrics["charts/learner_samples"] == 5 * 4 + 5 * 3
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert np.isfinite(metrics["losses/total"])
    assert anakin_train_step([runner], learner)["charts/policy_lag"] == 0.0


def test_runner_rejects_numpy_envs() -> None:
    with pytest.raises(TypeError, match="tensor-native env"):
        AnakinRunner(0, make_env("gymnasium/CartPole-v1", 2), 4, 1.0)


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("MTRL_TEST_COMPILE"),
    reason="torch.compile takes ~10-30 s on a small CPU; set MTRL_TEST_COMPILE=1 to run",
)
def test_compiled_unroll_gives_valid_batches() -> None:
    """``compile=True``: one graph per unroll; same shapes and semantics as eager."""
    env = make_env("tensor/CartPole-v1", 4, seed=0, max_episode_steps=3)
    model = _model(env)
    runner = AnakinRunner(0, env, 2, reward_scale=2.0, compile=True)
    eager = AnakinRunner(0, make_env("tensor/CartPole-v1", 4, seed=0, max_episode_steps=3), 2, 2.0)
    for _ in range(4):
        b, e = runner.collect(model, 0), eager.collect(model, 0)
        for f in FIELDS:
            x, y = getattr(b, f), getattr(e, f)
            assert x.shape == y.shape and x.dtype == y.dtype, f
        # the time limit does not depend on the sampled actions: identical flags
        assert torch.equal(b.truncated, e.truncated) and torch.equal(b.valid, e.valid)
        assert (b.rewards[b.valid] == 2.0).all() and (b.rewards[~b.valid] == 0).all()
    assert runner.episodes.drain()[1] == [3] * 8


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Discrete(5, start=-2),
        gym.spaces.MultiDiscrete([3, 4]),
        gym.spaces.Box(-2.0, 2.0, (1,), np.float32),
        gym.spaces.Box(np.array([-1.0, 0.0, -np.inf]), np.array([1.0, np.inf, np.inf]), (3,)),
    ],
)
def test_device_action_map_agrees_with_env_actions_tensor(space: gym.Space) -> None:
    if isinstance(space, gym.spaces.Discrete):
        raw = torch.randint(0, int(space.n), (64,))
    elif isinstance(space, gym.spaces.MultiDiscrete):
        raw = torch.stack([torch.randint(0, int(n), (64,)) for n in space.nvec], -1)
    else:
        raw = torch.randn(64, *space.shape) * 3
    mapped = DeviceActionMap(space, torch.device("cpu"))(raw)
    expected = env_actions_tensor(space, raw)
    assert mapped.dtype == expected.dtype and torch.equal(mapped, expected)
