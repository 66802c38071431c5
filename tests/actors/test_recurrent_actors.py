"""Actors of a recurrent model: every unroll carries its copies' core states at its start, the
learner's sequence API recomputes exactly what the actors acted with (so both reset the state
at the same rows), and the process and thread modes' central inference server keeps the same
per-actor, per-env states as the serial pool."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
import torch

from mtrl.actors.core_states import CoreStates
from mtrl.actors.inference import InferenceModel
from mtrl.actors.pool import ParallelPool, TaskSetup
from mtrl.actors.serial_pool import SerialPool
from mtrl.actors.unroll import UnrollBuffer
from mtrl.config import ModelConfig
from mtrl.learner.batch import task_batch
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.learner.recurrent import sequence_resets
from mtrl.plugins import get_plugins

pytestmark = pytest.mark.timeout(180)

T = 7
ENV = "memory/CueRecall-v0"
KWARGS = {"delay": 2}  # 4-step episodes: several ends and reset steps in every unroll


def _setup(num_envs: int = 4, seed: int = 3) -> TaskSetup:
    spec = get_plugins().envs.get(ENV)
    return TaskSetup(
        index=0,
        name=ENV,
        env_id=ENV,
        num_envs=num_envs,
        seed=seed,
        reward_scale=1.0,
        observation_space=spec.observation_space,
        action_space=spec.action_space,
        env_kwargs=dict(KWARGS),
    )


def _model(setup: TaskSetup, core: str = "lstm") -> MultiTaskModel:
    torch.manual_seed(0)
    spaces = [TaskSpaces(setup.observation_space, setup.action_space)]
    cfg = ModelConfig(encoder_dim=16, torso=[16], core={"kind": core, "hidden": 8})
    return MultiTaskModel(spaces, cfg)


def _snapshot(buf: UnrollBuffer) -> dict[str, np.ndarray]:
    names = ("obs", "actions", "behaviour_logp", "rewards", "valid", "core_state")
    return {k: np.array(getattr(buf, k)) for k in names}


def _serial(setup: TaskSetup, model: MultiTaskModel, n: int, greedy: bool = False) -> list:
    env = get_plugins().envs.get(ENV).build(setup.num_envs, setup.seed, **KWARGS)
    pool = SerialPool([setup], [env], T, InferenceModel(model, shared=True, greedy=greedy))
    out = []
    try:
        while len(out) < n:
            for ru in pool.get():
                out.append(_snapshot(ru.buffer))
                pool.release(ru)
    finally:
        pool.close()
    return out


@pytest.mark.parametrize("core", ["lstm", "gru"])
def test_the_learner_recomputes_what_the_actors_acted_with(core: str) -> None:
    """Behaviour log-probs of every step, reset steps included, equal the learner's from the
    unroll's initial state and resets; the state an unroll ends with is the next one's start."""
    setup = _setup()
    model = _model(setup, core)
    unrolls = _serial(setup, model, 4)
    assert not unrolls[0]["core_state"].any(), "a run starts from zero states"
    assert all((~u["valid"]).any() for u in unrolls), "episodes end inside every unroll"
    for u, nxt in itertools.pairwise(unrolls):
        batch = task_batch(_Unroll(u), torch.device("cpu"))
        with torch.no_grad():
            h = model.unroll(0, batch.obs, batch.core_state, sequence_resets(batch.valid))
            logp = model.policy(0, h[:-1]).log_prob(batch.actions)
            cell = model.core_of(0)
            _, end = cell(
                model.features(0, batch.obs[:-1]),
                batch.core_state,
                sequence_resets(batch.valid)[:-1],
            )
        torch.testing.assert_close(logp, batch.behaviour_logp, rtol=0, atol=1e-5)
        end[~batch.valid[-1]] = 0.0  # the last step was a reset step: the next row starts anew
        np.testing.assert_allclose(nxt["core_state"], end.numpy(), rtol=0, atol=1e-6)


class _Unroll:
    """A snapshot as the learner's ``task_batch`` reads an unroll buffer."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.__dict__.update(arrays)
        self.task, self.policy_version = 0, 0
        self.terminated = self.truncated = np.zeros_like(arrays["valid"])


@pytest.mark.parametrize(
    ("mode", "local"), [("process", False), ("thread", False), ("process", True)]
)
def test_parallel_unrolls_with_core_states_equal_the_serial_ones(mode: str, local: bool) -> None:
    """One actor behind the inference server, or acting with its own copy of the policy:
    bit-identical unrolls and initial states."""
    setup = _setup()
    model = _model(setup)
    expected = _serial(setup, model, 5, greedy=True)
    inference = InferenceModel(model, greedy=True)
    pool = ParallelPool([setup], T, inference, mode=mode, num_slots=2, local_inference=local)
    got = []
    try:
        pool.set_actors([1])
        deadline = time.monotonic() + 120
        while len(got) < 5 and time.monotonic() < deadline:
            for ru in pool.get(timeout=1.0):
                got.append(_snapshot(ru.buffer))
                pool.release(ru)
    finally:
        pool.close()
    assert len(got) >= 5
    assert any(u["core_state"].any() for u in expected), "states carried across unrolls"
    for e, g in zip(expected, got[:5], strict=True):
        for key in e:
            np.testing.assert_array_equal(g[key], e[key], err_msg=key)


def test_states_are_kept_per_actor_and_batched_in_one_forward() -> None:
    """Two actors of a task served together get what each would alone; a gone actor's states
    are dropped; a feed-forward model keeps none."""
    setup = _setup(num_envs=3)
    model = _model(setup)
    bufs = [
        UnrollBuffer.allocate(0, T, 3, setup.observation_space, setup.action_space, 16)
        for _ in range(2)
    ]
    g = np.random.default_rng(0)
    for b in bufs:
        b.obs[...] = g.random(b.obs.shape, dtype=np.float32)
        b.valid[...] = g.random(b.valid.shape) < 0.8
    together = CoreStates(InferenceModel(model, shared=True, greedy=True))
    alone = [CoreStates(InferenceModel(model, shared=True, greedy=True)) for _ in bufs]
    for t in range(T):
        together.act(0, [("a", bufs[0], t), ("b", bufs[1], t)])
        for key, states, b in zip("ab", alone, bufs, strict=True):
            states.act(0, [(key, b, t)])
    for key, states in zip("ab", alone, strict=True):
        torch.testing.assert_close(together._states[key], states._states[key], rtol=0, atol=1e-6)
    assert bufs[0].core_state.shape == (3, 16)
    together.retain(["b"])
    assert len(together) == 1
    ff = MultiTaskModel([TaskSpaces(setup.observation_space, setup.action_space)], ModelConfig())
    plain = CoreStates(InferenceModel(ff, shared=True))
    buf = UnrollBuffer.allocate(0, T, 3, setup.observation_space, setup.action_space)
    raw, logp, version = plain.act(0, [(0, buf, 0)])
    assert raw.shape == logp.shape == (3,) and version == 0
    assert buf.core_state is None and len(plain) == 0


def test_feed_forward_act_is_refused_for_a_recurrent_model() -> None:
    setup = _setup()
    inference = InferenceModel(_model(setup), shared=True)
    assert inference.state_size == 16
    with pytest.raises(ValueError, match="act_recurrent"):
        inference.act(0, np.zeros((4, 3), np.float32))
