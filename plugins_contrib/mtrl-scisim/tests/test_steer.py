"""Steering an ensemble of epidemics (``scisim/outbreak-boundary``): the tabulated truth
against fresh simulations and the branching-process limit, the estimate and its figure, the
env's contract, seeding and rewards, and the classic designs it is compared with."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("mtrl_scisim") is None:  # pragma: no cover - install hint
    pytest.skip(
        "mtrl-scisim is not installed: pip install -e plugins_contrib/mtrl-scisim",
        allow_module_level=True,
    )

from mtrl_scisim.steer import (
    OutbreakBoundaryBatchEnv,
    OutbreakStudy,
    grid_points,
    kernel_estimate,
    load_table,
    misclassified,
    outbreak_probability,
)
from mtrl_scisim.steer_acquisition import acquire, acquisition_score, strategy
from mtrl_scisim.steer_baselines import METHODS, run_study
from mtrl_scisim.streams import CopyStreams

ENV = "scisim/outbreak-boundary"


def test_the_table_is_the_simulators_law_and_its_large_population_limit() -> None:
    study = OutbreakStudy()
    table = load_table(study)
    # Fresh runs (other seeds than the table's) in a few cells: within 4 standard errors.
    runs = 600
    for r0, i0 in [(1.5, 1), (1.2, 3), (2.0, 2), (1.05, 20)]:
        final = study.simulate(
            np.full(runs, r0), np.full(runs, i0), CopyStreams(10_000 + np.arange(runs))
        )
        fresh = float(np.mean(final > study.major_fraction))
        tabled = float(table.probability(np.array([r0]), np.array([i0]))[0])
        se = np.sqrt(0.25 / runs + 0.25 / table.per_cell)
        assert abs(fresh - tabled) < 4 * se, (r0, i0, fresh, tabled)
    # Away from criticality the law is the branching process's.
    r0 = np.array([0.5, 0.6, 0.7, 2.5, 3.0, 3.4])
    for i0 in (1, 2, 3):
        got = table.probability(r0, np.full(len(r0), i0))
        want = outbreak_probability(r0, i0)
        assert np.all(np.abs(got - want) < 0.08), (i0, got, want)
    with pytest.raises(ValueError, match="other constants"):
        load_table(OutbreakStudy(population=500))


def test_the_estimate_and_the_figure_of_merit() -> None:
    at = grid_points(4)
    est, mass = kernel_estimate(np.zeros((0, 2)), np.zeros(0), at)
    assert np.all(est == 0.5) and np.all(mass == 0)
    est, mass = kernel_estimate(np.array([[0.1, 0.1], [0.9, 0.9]]), np.array([1.0, 0.0]), at)
    assert est[0] > 0.9 and est[-1] < 0.1  # each corner takes its neighbour's outcome
    assert mass[0] > mass[5]
    truth = np.array([0.9, 0.1, 0.6, 0.4])
    assert misclassified(np.array([0.8, 0.2, 0.4, 0.4]), truth) == 0.25
    assert misclassified(np.full(4, 0.5), truth) == 0.5  # 1/2 counts as "not likely"


@pytest.mark.parametrize("action", ["points", "cells", "acquisition"])
def test_the_env_conforms_to_the_batch_env_contract(action: str) -> None:
    from mtrl.testing import check_env

    kwargs = {"budget": 16, "action": action}
    check_env(ENV, num_envs=2, steps=30, env_kwargs=kwargs, spawn=False)


def test_studies_are_seeded_per_copy_and_returns_telescope() -> None:
    """Copy i of an env seeded s is the study an env seeded s + i runs as its copy 0; an
    episode lasts budget / members steps and its return is the first error minus the last."""
    actions = np.random.default_rng(0).random((12, 3, 8))
    three = OutbreakBoundaryBatchEnv(3, seed=7, budget=16)
    one = OutbreakBoundaryBatchEnv(1, seed=9, budget=16)
    obs3, obs1 = three.reset(), one.reset()
    np.testing.assert_array_equal(obs3[2], obs1[0])
    first = three.error.copy()
    returns = np.zeros(3)
    for t in range(4):
        out3, out1 = three.step(actions[t]), one.step(actions[t][2:3])
        np.testing.assert_array_equal(out3.obs[2], out1.obs[0])
        assert out3.reward[2] == out1.reward[0]
        returns += out3.reward
        assert out3.terminated.all() == (t == 3) and not out3.truncated.any()
    np.testing.assert_allclose(returns, first - three.error, atol=1e-6)
    assert np.all(np.abs(returns) <= 1)
    after = three.step(actions[4])  # a new study: no reward for the step that starts it
    assert np.all(after.reward == 0) and np.all(after.obs[:, -1] == 1.0)
    assert not np.array_equal(three.r0_low[0], three.r0_low[1])  # each copy its own study


def test_a_cell_action_runs_each_member_inside_the_cell_it_names() -> None:
    env = OutbreakBoundaryBatchEnv(2, seed=3, budget=8, action="cells")
    assert env.single_action_space.nvec.tolist() == [64] * 4
    env.reset()
    cells = np.array([[0, 63, 9, 9], [27, 27, 27, 1]])
    env.step(cells)
    for e in range(2):
        ij = np.floor(env.points[e] * 8).astype(int)
        np.testing.assert_array_equal(ij[:, 0] * 8 + ij[:, 1], cells[e])
    assert not np.array_equal(env.points[0][2], env.points[0][3])  # a new point each time
    with pytest.raises(ValueError, match="cells must be in"):
        env.step(np.array([[0, 64, 0, 0], [0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="action must be one of"):
        OutbreakBoundaryBatchEnv(1, action="grid")


def test_the_acquisition_rule_takes_the_best_cells_greedily_and_nearly_any_when_hot() -> None:
    rng = np.random.default_rng(0)
    est, density = rng.random(64), rng.random(64)
    score = acquisition_score(est, density, 0.5)
    greedy = acquire(est, density, 0.5, 0.0, 4, rng)
    assert set(greedy) == set(np.argsort(-score)[:4])
    # Hot: 4 distinct cells per draw, every cell drawn near 4/64 of the time (the score's
    # spread, under 3, is small beside a temperature of 100).
    counts = np.zeros(64)
    for _ in range(4000):
        cells = acquire(est, density, 0.5, 100.0, 4, rng)
        assert len(set(cells)) == 4
        counts[cells] += 1
    share = counts / 4000
    assert np.all(np.abs(share - 4 / 64) < 0.02), share.round(3)
    assert strategy(np.array([0.0, 0.0])) == (0.0, pytest.approx(0.01))
    assert strategy(np.array([1.0, 2.0])) == (2.0, pytest.approx(1.0))


def test_an_acquisition_action_runs_the_members_in_distinct_cells_of_its_rule() -> None:
    env = OutbreakBoundaryBatchEnv(2, seed=5, budget=24, action="acquisition")
    assert env.single_action_space.shape == (2,)
    env.reset()
    env.step(np.full((2, 2), 0.5))  # a first batch somewhere, so the estimate has a shape
    obs = env._obs.copy()
    env.step(np.zeros((2, 2)))  # coverage weight 0, temperature 0.01: near greedy
    for e in range(2):
        ij = np.floor(env.points[e][-4:] * 8).astype(int)
        cells = ij[:, 0] * 8 + ij[:, 1]
        assert len(set(cells)) == 4
        score = acquisition_score(obs[e, :64], obs[e, 64:128], 0.0)
        assert np.all(score[cells] >= np.sort(score)[-4] - 0.05), "not the best cells"


def test_the_classic_designs_run_the_same_study_and_learn_it() -> None:
    runs = {m: [run_study(m, seed, budget=48) for seed in range(3)] for m in METHODS}
    for method, errors in runs.items():
        for e in errors:
            assert e.shape == (13,) and np.all((e >= 0) & (e <= 1)), method
        starts = [e[0] for e in errors]
        assert starts == [e[0] for e in runs["random"]]  # same hidden studies by seed
    lhs_final = np.mean([e[-1] for e in runs["lhs"]])
    assert lhs_final < 0.5 * np.mean([e[0] for e in runs["lhs"]])
