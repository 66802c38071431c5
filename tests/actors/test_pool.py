"""Actor pools: the parallel data path (processes/threads, shared memory, central inference)
delivers exactly what the serial path does, stamps weight versions, batches across actors,
and survives a killed actor."""

from __future__ import annotations

import copy
import os
import signal
import time

import numpy as np
import pytest
import torch

from mtrl.actors.factory import local_inference
from mtrl.actors.faults import FaultPolicy
from mtrl.actors.inference import InferenceModel
from mtrl.actors.pool import ParallelPool, TaskSetup
from mtrl.actors.serial_pool import SerialPool
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


@pytest.mark.parametrize(
    ("mode", "local"), [("process", False), ("thread", False), ("process", True), ("thread", True)]
)
def test_parallel_unrolls_equal_the_serial_ones(mode, local):
    """Same seed, same (greedy) policy: one actor in a worker produces bit-identical unrolls,
    including the bootstrap row carried from one slot to the next and the reset-step mask —
    acting through the inference server or with its own copy of the policy."""
    setups = [_setup("gymnasium/CartPole-v1")]
    model = _model(setups)
    expected = _serial_unrolls(setups, model, 6)
    pool = ParallelPool(
        setups,
        T,
        InferenceModel(model, greedy=True),
        mode=mode,
        num_slots=2,
        local_inference=local,
    )
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


@pytest.mark.parametrize(("mode", "local"), [("thread", False), ("process", True)])
def test_versions_are_stamped_and_lag_is_visible(mode, local):
    setups = [_setup("gymnasium/CartPole-v1")]
    model = _model(setups)
    pool = ParallelPool(
        setups, T, InferenceModel(model), mode=mode, num_slots=3, local_inference=local
    )
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


@pytest.mark.slow
def test_several_actors_of_a_task_share_forwards():
    setups = [_setup("gymnasium/CartPole-v1", num_envs=8), _setup("minatar/breakout", 1)]
    model = _model(setups)
    pool = ParallelPool(setups, T, InferenceModel(model), mode="process", num_slots=2)
    try:
        pool.set_actors([3, 1])
        per_task = [0, 0]
        deadline = time.monotonic() + 180

        def shared() -> bool:  # some forward served more than one request
            return pool.server.forwards < pool.server.requests

        # On a starved machine the actors may take turns for a while, each request served
        # alone: wait for what the test checks, not a fixed number of unrolls.
        while (min(per_task) < 6 or not shared()) and time.monotonic() < deadline:
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


def test_local_actors_act_with_the_weights_the_learner_publishes():
    """With local inference an actor process loads each published version before its next
    step: a policy republished to always push left is followed from the next unroll on, and
    the server serves no forward at all."""
    setups = [_setup("gymnasium/CartPole-v1")]
    model = _model(setups)
    pool = ParallelPool(
        setups, T, InferenceModel(model), mode="process", num_slots=1, local_inference=True
    )
    left = _model(setups)
    with torch.no_grad():  # the policy head's logits: action 0 by a margin of 100
        head = left.policy_heads[0].linear
        head.weight.zero_()
        head.bias.copy_(torch.tensor([100.0, 0.0]))
    versions, actions = [], []
    try:
        pool.set_actors([1])
        deadline = time.monotonic() + 60
        while len(versions) < 4 and time.monotonic() < deadline:
            for ru in pool.get(timeout=1.0):
                versions.append(ru.buffer.versions.copy())
                actions.append(ru.buffer.actions.copy())
                if len(versions) == 2:
                    pool.publish(left, 7)  # the slot is still ours: the actor is waiting
                pool.release(ru)
        forwards = pool.server.forwards
    finally:
        pool.close()
    assert len(versions) >= 4
    assert (versions[0] == 0).all() and (versions[1] == 0).all()
    assert (versions[2] == 7).all() and (versions[3] == 7).all()
    assert actions[0].any(), "the initial policy pushes both ways"
    assert not actions[2].any() and not actions[3].any(), "the published policy: left only"
    assert forwards == 0, "nothing asked the inference server"


@pytest.mark.slow
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


def test_auto_inference_is_local_for_process_actors_of_a_cpu_learner_only() -> None:
    model = _model([_setup("gymnasium/CartPole-v1")])
    assert local_inference("auto", "process", model)
    assert not local_inference("auto", "thread", model), "threads share the learner's GIL"
    assert local_inference("local", "thread", model)
    assert not local_inference("central", "process", model)
    meta = copy.deepcopy(model).to("meta")  # any device but the CPU: central, batched there
    assert not local_inference("auto", "process", meta)
    assert local_inference("local", "process", meta)
