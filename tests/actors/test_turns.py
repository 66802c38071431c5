"""Turns in the serial pool (:mod:`mtrl.actors.turns`): smooth weighted round robin meets the
rates at every moment, equal rates are plain round robin, and a scheduler's data shares become
turns per task — on the rule alone and in a real serial pool."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl.actors.inference import InferenceModel
from mtrl.actors.serial_pool import SerialPool
from mtrl.actors.turns import take_turns, turn_rates
from mtrl.plugins import get_plugins
from tests.actors.test_pool import _model, _setup


def test_equal_rates_are_round_robin_in_task_order() -> None:
    picks, credit = take_turns(np.zeros(4), np.ones(4), 12)
    assert picks == [0, 1, 2, 3] * 3
    np.testing.assert_allclose(credit, 0.0)


def test_credit_carries_over_between_calls() -> None:
    rates = np.array([3.0, 1.0, 0.5])
    whole, _ = take_turns(np.zeros(3), rates, 20)
    first, credit = take_turns(np.zeros(3), rates, 7)
    rest, _ = take_turns(credit, rates, 13)
    assert first + rest == whole


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.01, 10.0), min_size=1, max_size=6),
    st.integers(1, 200),
)
def test_every_prefix_of_turns_keeps_within_two_of_the_exact_proportion(
    rates: list[float], n: int
) -> None:
    r = np.array(rates)
    picks, _ = take_turns(np.zeros(len(r)), r, n)
    counts = np.zeros(len(r))
    for k, i in enumerate(picks, start=1):
        counts[i] += 1
        assert np.abs(counts - k * r / r.sum()).max() < 2.0, (k, counts)


def test_a_task_with_no_share_gets_no_turn() -> None:
    picks, _ = take_turns(np.zeros(3), turn_rates([0.5, 0.0, 0.5], [16, 16, 16]), 30)
    assert 1 not in picks and picks.count(0) == picks.count(2) == 15


def test_rates_count_samples_not_unrolls() -> None:
    # Equal data shares, one task with twice the envs: it needs half the turns.
    np.testing.assert_allclose(turn_rates([0.5, 0.5], [32, 16]), [2 / 3, 4 / 3])
    np.testing.assert_allclose(turn_rates([None, None], [32, 16]), [1.0, 1.0])  # no targets
    # A task without a share among tasks with one: their mean share.
    np.testing.assert_allclose(turn_rates([0.6, None, 0.2], [8, 8, 8]), [1.5, 1.0, 0.5])
    with pytest.raises(ValueError, match="2 shares for 3 tasks"):
        turn_rates([0.5, 0.5], [8, 8, 8])
    with pytest.raises(ValueError, match="every rate is 0"):
        take_turns(np.zeros(2), np.zeros(2), 1)
    assert take_turns(np.zeros(0), turn_rates([], []), 0)[0] == []  # a pool with no tasks


def test_the_serial_pool_steps_tasks_in_proportion_to_their_shares() -> None:
    setups = [_setup("gymnasium/CartPole-v1", 0, seed=1), _setup("gymnasium/Acrobot-v1", 1)]
    envs = [get_plugins().envs.get(s.env_id).build(s.num_envs, s.seed) for s in setups]
    pool = SerialPool(setups, envs, 8, InferenceModel(_model(setups), shared=True))
    try:

        def tasks_of(gets: int) -> list[int]:
            out = []
            for _ in range(gets):
                for ru in pool.get():
                    out.append(ru.task)
                    assert ru.info.env_steps == 8 * 4
                    pool.release(ru)
            return out

        assert tasks_of(5) == [0, 1] * 5  # no shares: one unroll of each per get
        pool.set_data_shares([0.75, 0.25])
        got = tasks_of(20)
        assert len(got) == 40 and got.count(0) == 30, got
        pool.set_data_shares([None, None])
        got = tasks_of(10)
        assert abs(got.count(0) - 10) <= 1, got
    finally:
        pool.close()
