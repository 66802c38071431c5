"""The recurrent core: the sequence API equals stepping one row at a time with resets, bit for
bit; resets isolate episodes; the learner runs the core from each unroll's initial state; a
feed-forward model is unchanged."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.config import LearnerConfig, ModelConfig
from mtrl.config.core import CoreConfig
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.learner.recurrent import RecurrentCore, reset_state, sequence_resets
from mtrl.learner.synthetic import random_task_batch

T, N = 9, 5
SPACES = [
    TaskSpaces(gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2)),
    TaskSpaces(gym.spaces.Box(-1, 1, (5,), np.float32), gym.spaces.Box(-2, 2, (2,), np.float32)),
]
CORES = [
    {"kind": "lstm", "hidden": 8},
    {"kind": "gru", "hidden": 8},
    {"kind": "lstm", "hidden": 8, "shared": False},
]


def _model(core: dict | None) -> MultiTaskModel:
    torch.manual_seed(0)
    return MultiTaskModel(SPACES, ModelConfig(encoder_dim=16, torso=[16], core=core))


def _resets(g: torch.Generator) -> torch.Tensor:
    resets = torch.rand(T + 1, N, generator=g) < 0.3
    resets[:, 0] = False  # one column never resets, one resets at every row
    resets[:, 1] = True
    return resets


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_sequence_equals_stepping_one_row_at_a_time_bit_exactly(kind: str) -> None:
    torch.manual_seed(1)
    core = RecurrentCore(CoreConfig(kind=kind, hidden=6), input_dim=4)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(T + 1, N, 4, generator=g)
    state = torch.randn(N, core.state_size, generator=g)
    resets = _resets(g)
    out, final = core(x, state, resets)
    ref, s = [], state
    for t in range(T + 1):  # the reference: zero the state where a row starts an episode
        if resets[t].any():
            s = s.clone()
            s[resets[t]] = 0.0
        o, s = core.step(x[t], s)
        ref.append(o)
    assert torch.equal(out, torch.stack(ref))
    assert torch.equal(final, s)


@pytest.mark.parametrize("core", CORES)
def test_model_unroll_equals_the_step_api_with_resets(core: dict) -> None:
    """The learner's sequence face against the actors' step face, on an unroll's real reset
    rule: the row after a reset step starts from zeros."""
    model = _model(core)
    batch = random_task_batch(1, SPACES[1], T, N, seed=3, state_size=model.state_size)
    resets = sequence_resets(batch.valid)
    with torch.no_grad():
        seq = model.unroll(1, batch.obs, batch.core_state, resets)
        x = model.features(1, batch.obs)
        cell, s, exact = model.core_of(1), batch.core_state, []
        for t in range(T + 1):  # same features: the core's resets must match bit for bit
            o, s = cell.step(x[t], reset_state(s, resets[t]))
            exact.append(o)
        s, stepped = batch.core_state, []
        for t in range(T + 1):  # the actors' way: zero a copy's state after its reset step
            o, s = model.step(1, batch.obs[t], s)
            stepped.append(o)
            if t < T:
                s = reset_state(s, ~batch.valid[t])
    assert torch.equal(seq, torch.stack(exact))
    torch.testing.assert_close(seq, torch.stack(stepped), rtol=0, atol=1e-6)


def test_sequence_resets_start_episodes_after_reset_steps() -> None:
    """Step 1 ends an episode: row 2 is its final observation (kept with the episode's memory
    for the truncation bootstrap), step 2 is the reset step, row 3 starts the next episode."""
    valid = torch.tensor([[True], [True], [False], [True]])
    assert sequence_resets(valid)[:, 0].tolist() == [False, False, False, True, False]


def test_a_reset_cuts_everything_before_it_off() -> None:
    model = _model(CORES[0])
    g = torch.Generator().manual_seed(4)
    obs = torch.randn(T + 1, N, 3, generator=g)
    state = torch.randn(N, model.state_size, generator=g)
    resets = torch.zeros(T + 1, N, dtype=torch.bool)
    resets[5] = True
    changed = obs.clone()
    changed[:5] += 1.0
    with torch.no_grad():
        a = model.unroll(0, obs, state, resets)
        b = model.unroll(0, changed, torch.randn(N, model.state_size, generator=g), resets)
    assert torch.equal(a[5:], b[5:]), "rows from the reset on see nothing before it"
    assert not torch.allclose(a[:5], b[:5])


def test_shared_core_runs_tasks_side_by_side_as_if_alone() -> None:
    model = _model(CORES[0])
    batches = [random_task_batch(k, SPACES[k], T, N, seed=k, state_size=16) for k in (0, 1)]
    with torch.no_grad():
        xs = [model.features(b.task, b.obs) for b in batches]
        states = [b.core_state for b in batches]
        resets = [sequence_resets(b.valid) for b in batches]
        together = model.run_cores([0, 1], xs, states, resets)
        alone = [model.run_cores([k], [xs[k]], [states[k]], [resets[k]])[0] for k in (0, 1)]
    for t, a in zip(together, alone, strict=True):
        torch.testing.assert_close(t, a, rtol=0, atol=1e-6)


def test_per_task_cores_belong_to_their_task() -> None:
    model = _model(CORES[2])
    assert model.core is None and len(model.cores) == 2
    own = {id(p) for p in model.task_parameters(0)}
    assert {id(p) for p in model.cores[0].parameters()} <= own
    assert not {id(p) for p in model.cores[1].parameters()} & own
    assert model.per_task_modules == ("encoders", "policy_heads", "cores")


def test_learner_runs_the_core_from_the_unrolls_initial_state() -> None:
    """The initial state reaches the loss; a batch without one is refused by name."""
    cfg = LearnerConfig.model_validate({"model": {"encoder_dim": 16, "torso": [16], "core": "gru"}})
    grads = []
    for scale in (0.0, 1.0):
        torch.manual_seed(0)
        learner = ImpalaLearner(MultiTaskModel(SPACES, cfg.model), cfg, ["a", "b"])
        batch = random_task_batch(0, SPACES[0], T, N, seed=5, state_size=128)
        batch.core_state = batch.core_state * scale
        learner.update([batch])
        grads.append(learner.model.core.cell.weight_hh.grad.clone())
    assert not torch.allclose(grads[0], grads[1])
    batch.core_state = None
    with pytest.raises(ValueError, match="task 0 has core_state none"):
        learner.update([batch])


def test_feed_forward_model_is_unchanged() -> None:
    """No core: no new parameters (old checkpoints load), an empty state passes through."""
    model = _model(None)
    assert not model.recurrent and model.state_size == 0
    assert not any(k.startswith(("core", "cores")) for k in model.state_dict())
    obs = torch.randn(N, 3)
    h, state = model.step(0, obs, model.initial_state(N))
    assert state.shape == (N, 0)
    assert torch.equal(h, model.embed(0, obs))
    recurrent = _model(CORES[0])
    with pytest.raises(ValueError, match="recurrent core"):
        recurrent.embed(0, obs)
    dist, value = recurrent(0, obs)  # one row from zero states
    assert value.shape == (N,) and dist.sample().shape == (N,)
