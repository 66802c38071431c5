"""The one sampler builder every replay-based rule calls: the ``replay:`` section's sampler,
exponents and annealing, over a storage's items."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from mtrl.config.replay import ReplayConfig
from mtrl.replay import (
    PrioritizedSampler,
    SequenceStorage,
    TransitionStorage,
    UniformSampler,
    annealed_beta,
    make_sampler,
    set_beta,
    task_replay,
)

OBS, ACT = spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(2)


def test_the_section_names_the_sampler_and_its_exponents() -> None:
    uniform = make_sampler(ReplayConfig(), 40)
    assert isinstance(uniform, UniformSampler) and uniform.capacity == 40
    section = ReplayConfig(sampler="prioritized", priority_alpha=0.3, priority_beta=0.2)
    prioritized = make_sampler(section, 40)
    assert isinstance(prioritized, PrioritizedSampler)
    assert (prioritized.capacity, prioritized.alpha, prioritized.beta) == (40, 0.3, 0.2)


@pytest.mark.parametrize(
    "storage",
    [
        TransitionStorage(0, OBS, ACT, unroll_length=4, capacity=10),
        SequenceStorage(0, OBS, ACT, 4, 3, 0),
    ],
    ids=["transitions", "sequences"],
)
def test_a_task_replay_addresses_its_storages_items(
    storage: TransitionStorage | SequenceStorage,
) -> None:
    replay = task_replay(storage, ReplayConfig(sampler="prioritized"))
    assert replay.storage is storage and replay.sampler.capacity == storage.capacity


def test_beta_rises_linearly_to_one_and_only_prioritized_samplers_take_it() -> None:
    section = ReplayConfig(sampler="prioritized", priority_beta=0.4)
    assert [annealed_beta(section, p) for p in (-1, 0, 0.5, 1, 2)] == [0.4, 0.4, 0.7, 1.0, 1.0]
    store = TransitionStorage(0, OBS, ACT, unroll_length=4, capacity=8)
    prioritized, uniform = task_replay(store, section), task_replay(store, ReplayConfig())
    set_beta([prioritized], section, 0.5)
    set_beta([uniform], ReplayConfig(), 0.5)
    assert prioritized.sampler.beta == pytest.approx(0.7)  # type: ignore[attr-defined]
    assert not hasattr(uniform.sampler, "beta")
