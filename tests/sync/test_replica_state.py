"""What loosely synchronised replicas average (mtrl.sync.replica_state), on one process:
the outer step's math, the period schedule, and PopArt's heads kept consistent when replicas
with different statistics are averaged."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.config import LearnerConfig
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.sync.loose_sync import next_period, ring_allreduce_bytes
from mtrl.sync.replica_state import (
    ReplicaState,
    flatten,
    mean_state,
    outer_step,
    unflatten_into,
)

SPACES = [
    TaskSpaces(spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(3)),
    TaskSpaces(spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (2,), np.float32)),
]
CFG = LearnerConfig.model_validate({"model": {"encoder_dim": 8, "torso": [16]}})


def _learner(seed: int = 0) -> ImpalaLearner:
    torch.manual_seed(seed)
    return ImpalaLearner(MultiTaskModel(SPACES, CFG.model), CFG, ["a", "b"])


def test_outer_step_is_sgd_with_nesterov_momentum_on_the_mean_change() -> None:
    g = torch.Generator().manual_seed(0)
    anchor = torch.randn(7, generator=g)
    ref = torch.nn.Parameter(anchor.clone())
    sgd = torch.optim.SGD([ref], lr=0.7, momentum=0.9, nesterov=True)
    momentum = torch.zeros(7)
    for _ in range(4):
        delta = torch.randn(7, generator=g)
        anchor, momentum = outer_step(anchor, momentum, delta, 0.7, 0.9)
        ref.grad = delta.clone()
        sgd.step()
        torch.testing.assert_close(anchor, ref.detach())


def test_outer_step_with_unit_rate_and_no_momentum_is_the_mean() -> None:
    anchor = torch.tensor([1.0, 2.0])
    replicas = torch.tensor([[0.0, 4.0], [3.0, 1.0]])
    delta = (anchor - replicas).mean(0)
    new, _ = outer_step(anchor, torch.zeros(2), delta, 1.0, 0.0)
    torch.testing.assert_close(new, replicas.mean(0))
    with pytest.raises(ValueError, match="one shape"):
        outer_step(anchor, torch.zeros(3), delta, 1.0, 0.0)


def test_next_period_shortens_only_the_last_periods() -> None:
    assert next_period(50, remaining_steps=1e6, steps_per_update=320) == 50
    assert next_period(50, remaining_steps=3200, steps_per_update=320) == 10
    assert next_period(50, remaining_steps=100, steps_per_update=320) == 1
    assert next_period(50, remaining_steps=0, steps_per_update=320) == 1
    assert next_period(50, remaining_steps=5000, steps_per_update=0) == 50  # no rate yet
    assert ring_allreduce_bytes(1000, 1) == 0
    assert ring_allreduce_bytes(1000, 4) == 1500


def test_flatten_and_unflatten_round_trip() -> None:
    ts = [torch.randn(2, 3), torch.randn(4)]
    flat = flatten(ts)
    out = [torch.zeros(2, 3), torch.zeros(4)]
    unflatten_into(flat, out)
    for a, b in zip(ts, out, strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="10 values for 9"):
        unflatten_into(torch.zeros(10), [torch.zeros(9)])


def _set_stats(learner: ImpalaLearner, mu: list[float], sd: list[float]) -> None:
    learner.mu.copy_(torch.tensor(mu, dtype=torch.float64))
    learner.nu.copy_(learner.mu**2 + torch.tensor(sd, dtype=torch.float64) ** 2)


def _values(learner: ImpalaLearner, h: torch.Tensor) -> torch.Tensor:
    """Each task's unnormalised value of features ``h [B, H]``: ``[B, K]``."""
    mu, sigma = learner._stats()
    m = learner.model
    return (h @ m.value_weight.T + m.value_bias) * sigma + mu


def test_a_replica_state_loaded_back_changes_nothing() -> None:
    learner = _learner()
    _set_stats(learner, [3.0, -20.0], [2.0, 50.0])
    before = {k: v.clone() for k, v in learner.model.state_dict().items()}
    learner.load_replica_state(learner.replica_state())
    for name, want in before.items():
        torch.testing.assert_close(learner.model.state_dict()[name], want, msg=name)


@settings(max_examples=30, deadline=None)
@given(
    mus=st.lists(st.floats(-100, 100), min_size=4, max_size=4),
    sds=st.lists(st.floats(0.01, 100), min_size=4, max_size=4),
)
def test_averaged_heads_predict_the_mean_of_the_replicas_returns(mus, sds) -> None:
    """Two replicas with the same torso but different heads and PopArt statistics: the mean
    state's heads, normalised by the mean statistics, predict the mean of the two replicas'
    unnormalised values for any features."""
    a, b = _learner(0), _learner(0)
    with torch.no_grad():
        b.model.value_weight.add_(0.3)
        b.model.value_bias.sub_(0.7)
    _set_stats(a, mus[:2], sds[:2])
    _set_stats(b, mus[2:], sds[2:])
    h = torch.randn(5, a.model.value_weight.shape[1])
    want = (_values(a, h).double() + _values(b, h).double()) / 2
    mixed = mean_state([a.replica_state(), b.replica_state()])
    a.load_replica_state(mixed)
    want_mu = (
        torch.tensor(mus[:2], dtype=torch.float64) + torch.tensor(mus[2:], dtype=torch.float64)
    ) / 2
    torch.testing.assert_close(a.mu, want_mu)
    scale = want.abs().max().item() + 1.0
    torch.testing.assert_close(_values(a, h).double(), want, atol=2e-5 * scale, rtol=1e-4)


def test_mean_state_ors_the_seen_flags_and_refuses_nothing_to_average() -> None:
    s1 = ReplicaState(
        torch.zeros(2), torch.zeros(1, dtype=torch.float64), torch.tensor([1, 0]).bool()
    )
    s2 = ReplicaState(
        torch.ones(2), torch.ones(1, dtype=torch.float64), torch.tensor([0, 0]).bool()
    )
    m = mean_state([s1, s2])
    assert m.seen.tolist() == [True, False]
    assert m.params.tolist() == [0.5, 0.5]
    with pytest.raises(ValueError, match="no replica states"):
        mean_state([])
