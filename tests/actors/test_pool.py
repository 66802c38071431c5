"""Actor pools: the parallel data path (processes/threads, shared memory, central inference)
delivers exactly what the serial path does, stamps weight versions, batches across actors,
and survives a killed actor."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
import torch

from mtrl.actors.faults import FaultPolicy
from mtrl.actors.inference import InferenceModel
from mtrl.actors.pool import ParallelPool, SerialPool, TaskSetup
from mtrl.config import ModelConfig
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import get_plugins

pytestmark = pytest.mark.timeout(180)

T = 8


def _setup(env_id: str, index: int = 0, num_envs: int = 4, seed: int = 3) -> TaskSetup:
    spec = get_plugins().envs.get(env_id)
    return TaskSetup(
        index=index,
        name=env_id,
        env_id=env_id,
        num_envs=num_envs,
        seed=seed,
        reward_scale=0.5,
        observation_space=spec.observation_space,
        action_space=spec.action_space,
    )


def _model(setups: list[TaskSetup]) -> MultiTaskModel:
    torch.manual_seed(0)
    spaces = [TaskSpaces(s.observation_space, s.action_space) for s in setups]
    return MultiTaskModel(spaces, ModelConfig(encoder_dim=32, torso=[32]))


def _snapshot(ru) -> dict[str, np.ndarray]:
    b = ru.buffer
    return {
        "obs": np.array(b.obs),
        "actions": b.actions.copy(),
        "rewards": b.rewards.copy(),
        "terminated": b.terminated.copy(),
        "truncated": b.truncated.copy(),
        "valid": b.valid.copy(),
    }


def _serial_unrolls(setups, model, n):
    envs = [get_plugins().envs.get(s.env_id).build(s.num_envs, s.seed) for s in setups]
    pool = SerialPool(setups, envs, T, InferenceModel(model, shared=True, greedy=True))
    out = []
    try:
        while len(out) < n:
            for ru in pool.get():
                out.append(_snapshot(ru))
                pool.release(ru)
    finally:
        pool.close()
    return out


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_parallel_unrolls_equal_the_serial_ones(mode):
    """Same seed, same (greedy) policy: one actor in a worker produces bit-identical unrolls,
    including the bootstrap row carried from one slot to the next and the reset-step mask."""
    setups = [_setup("gymnasium/CartPole-v1")]
    model = _model(setups)
    expected = _serial_unrolls(setups, model, 6)
    pool = ParallelPool(setups, T, InferenceModel(model, greedy=True), mode=mode, num_slots=2)
    got = []
    try:
        pool.set_actors([1])
        deadline = time.monotonic() + 120
        while len(got) < 6 and time.monotonic() < deadline:
            for ru in pool.get(timeout=1.0):
                got.append(_snapshot(ru))
                pool.release(ru)
    finally:
        pool.close()
    assert len(got) >= 6
    assert any((~u["valid"]).any() for u in expected), "episodes must end inside the window"
    for e, g in zip(expected, got[:6], strict=True):
        for key in e:
            np.testing.assert_array_equal(g[key], e[key], err_msg=key)


def test_versions_are_stamped_and_lag_is_visible():
    setups = [_setup("gymnasium/CartPole-v1")]
    model = _model(setups)
    pool = ParallelPool(setups, T, InferenceModel(model), mode="thread", num_slots=3)
    try:
        pool.set_actors([1])
        seen = []
        deadline = time.monotonic() + 60
        while len(seen) < 6 and time.monotonic() < deadline:
            for ru in pool.get(timeout=1.0):
                seen.append(ru.buffer.versions.copy())
                pool.release(ru)
                pool.publish(model, len(seen))
    finally:
        pool.close()
    assert seen[0].min() == 0
    assert seen[-1].max() >= 3, "published versions reach the actors"
    assert all(np.all(np.diff(v) >= 0) for v in seen), "versions never go backwards in an unroll"


def test_several_actors_of_a_task_share_forwards():
    setups = [_setup("gymnasium/CartPole-v1", num_envs=8), _setup("minatar/breakout", 1)]
    model = _model(setups)
    pool = ParallelPool(setups, T, InferenceModel(model), mode="process", num_slots=2)
    try:
        pool.set_actors([3, 1])
        per_task = [0, 0]
        deadline = time.monotonic() + 120
        while min(per_task) < 6 and time.monotonic() < deadline:
            for ru in pool.get(timeout=1.0):
                per_task[ru.task] += 1
                assert ru.buffer.num_envs == setups[ru.task].num_envs
                pool.release(ru)
        assert pool.actors_per_task() == [3, 1]
        requests, forwards = pool.server.requests, pool.server.forwards
    finally:
        pool.close()
    assert min(per_task) >= 6
    assert forwards < requests, "waiting actors of one task are served by one forward"


def test_a_killed_actor_is_reported_and_restarted():
    setups = [_setup("gymnasium/CartPole-v1")]
    model = _model(setups)
    faults = FaultPolicy(max_restarts=3, backoff_base_s=0.1)
    pool = ParallelPool(setups, T, InferenceModel(model), mode="process", faults=faults)
    try:
        pool.set_actors([1])
        first = pool.get(timeout=60)
        assert first
        for ru in first:
            pool.release(ru)
        (victim,) = [h for h in pool._handles.values() if h.alive]
        os.kill(victim.worker.pid, signal.SIGKILL)
        got_after = 0
        deadline = time.monotonic() + 120
        while got_after < 3 and time.monotonic() < deadline:
            for ru in pool.get(timeout=1.0):
                if ru.actor_id != victim.spec.actor_id:
                    got_after += 1
                pool.release(ru)
        events = pool.faults[0]
    finally:
        pool.close()
    assert events.faults == 1 and events.restarts == 1
    assert "exited" in events.last_error
    assert got_after >= 3, "the restarted actor delivers unrolls"
