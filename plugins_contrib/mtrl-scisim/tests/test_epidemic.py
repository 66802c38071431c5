"""Physics and contract tests of scisim/epidemic (exact SSA and tau-leaping)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("mtrl_scisim") is None:  # pragma: no cover - install hint
    pytest.skip(
        "mtrl-scisim is not installed: pip install -e plugins_contrib/mtrl-scisim",
        allow_module_level=True,
    )

from mtrl_scisim.epidemic import METHODS, EpidemicBatchEnv, sir_final_size

from mtrl.testing import check_env

NONE, DISTANCING, LOCKDOWN = 0, 1, 2


def attack_rates(env: EpidemicBatchEnv, action: int, max_days: int = 2000) -> np.ndarray:
    """Fraction ever infected in each copy's first episode, under a constant intervention."""
    env.reset()
    final = np.full(env.num_envs, np.nan)
    act = np.full(env.num_envs, action)
    for _ in range(max_days):
        out = env.step(act)
        ended = (out.terminated | out.truncated) & np.isnan(final)
        final[ended] = 1.0 - out.obs[ended, 0].astype(float)  # (I + R) / N at the end
        if not np.isnan(final).any():
            return final
    raise AssertionError(f"epidemics still running after {max_days} days")


@pytest.mark.parametrize("method", METHODS)
def test_conformance(method: str) -> None:
    report = check_env(
        "scisim/epidemic",
        num_envs=3,
        steps=60,
        env_kwargs={"method": method, "horizon": 15},
        spawn=method == "gillespie",  # one spawn check is enough; each costs a process start
    )
    assert report.episode_ends >= 3


def test_sir_final_size_equation() -> None:
    assert sir_final_size(2.0) == pytest.approx(0.7968121300, abs=1e-9)  # classical value
    assert sir_final_size(0.8) == 0.0
    for r0, s0 in [(1.5, 0.999), (3.0, 0.99), (0.5, 0.99)]:
        z = sir_final_size(r0, s0)
        assert 1.0 - z == pytest.approx(s0 * np.exp(-r0 * z), abs=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_counts_are_conserved_and_monotone(method: str) -> None:
    n_envs, pop = 32, 500
    env = EpidemicBatchEnv(n_envs, seed=3, population=pop, method=method, horizon=80)
    env.reset()
    rng = np.random.default_rng(0)
    prev = (env.s.copy(), env.r.copy())
    prev_done = np.zeros(n_envs, bool)
    for _ in range(250):
        out = env.step(rng.integers(0, 3, n_envs))
        np.testing.assert_array_equal(env.s + env.i + env.r, pop)
        assert (env.s >= 0).all() and (env.i >= 0).all() and (env.r >= 0).all()
        live = ~prev_done
        assert (env.s[live] <= prev[0][live]).all(), "S increased"
        assert (env.r[live] >= prev[1][live]).all(), "R decreased"
        # every simulated event moved one person S -> I or I -> R
        moved = (prev[0] - env.s) + (env.r - prev[1])
        np.testing.assert_array_equal(env.last_events[live], moved[live])
        np.testing.assert_array_equal(out.terminated, env.i == 0)  # ended copies not yet reset
        np.testing.assert_allclose(out.obs[:, :3].sum(axis=1), 1.0, atol=1e-6)
        prev, prev_done = (env.s.copy(), env.r.copy()), out.terminated | out.truncated


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("beta", [0.2, 0.3])
def test_mean_final_size_matches_the_deterministic_equation(method: str, beta: float) -> None:
    pop, i0 = 2000, 20
    env = EpidemicBatchEnv(
        48,
        seed=11,
        population=pop,
        initial_infected=i0,
        beta=beta,
        gamma=0.1,
        method=method,
        horizon=2000,
    )
    expected = sir_final_size(beta / 0.1, 1.0 - i0 / pop)
    assert attack_rates(env, NONE).mean() == pytest.approx(expected, abs=0.02)


@pytest.mark.parametrize("method", METHODS)
def test_subcritical_outbreaks_die_out(method: str) -> None:
    env = EpidemicBatchEnv(64, seed=5, beta=0.05, gamma=0.1, method=method, horizon=365)
    rates = attack_rates(env, NONE)  # raises unless every copy ended (terminated) in time
    assert rates.mean() < 0.04  # branching process: E[total] = I0 / (1 - R0) = 20 of 1000
    assert rates.max() < 0.1


@pytest.mark.parametrize("method", METHODS)
def test_interventions_lower_the_attack_rate(method: str) -> None:
    means = [
        attack_rates(EpidemicBatchEnv(32, seed=9, method=method, horizon=1000), a).mean()
        for a in (NONE, DISTANCING, LOCKDOWN)
    ]
    assert means[0] > means[1] + 0.1 > means[2] + 0.2, means
    assert means[2] < 0.1


@pytest.mark.parametrize("method", METHODS)
def test_pure_recovery_is_exactly_binomial(method: str) -> None:
    """With beta = 0, I(t) ~ Bin(I0, exp(-gamma t)) exactly for both methods."""
    n, i0, days, gamma = 800, 50, 5, 0.1
    env = EpidemicBatchEnv(n, seed=0, beta=0.0, gamma=gamma, initial_infected=i0, method=method)
    env.reset()
    for _ in range(days):
        env.step(np.zeros(n, np.int64))
    p = np.exp(-gamma * days)
    mean, var = i0 * p, i0 * p * (1 - p)
    assert env.i.mean() == pytest.approx(mean, abs=4 * np.sqrt(var / n))
    assert env.i.var() == pytest.approx(var, rel=0.2)


def test_rewards_and_episode_ends() -> None:
    n = 16
    env = EpidemicBatchEnv(
        n,
        seed=2,
        population=300,
        initial_infected=2,
        method="gillespie",
        horizon=30,
        action_costs=(0.0, 0.5, 2.0),
        infection_weight=3.0,
    )
    env.reset()
    age = np.zeros(n, np.int64)  # days into the current episode, counted independently
    prev_done = np.zeros(n, bool)
    ends = {"terminated": 0, "truncated": 0}
    for _ in range(90):
        s_before = env.s.copy()
        out = env.step(np.full(n, DISTANCING))
        age = np.where(prev_done, 0, age + 1)
        live = ~prev_done
        expected = -(3.0 * (s_before - env.s) / 300 + 0.5)
        np.testing.assert_allclose(out.reward[live], expected[live], rtol=1e-6)
        np.testing.assert_array_equal(out.reward[~live], 0.0)
        np.testing.assert_array_equal(out.truncated, (age == 30) & (env.i > 0) & live)
        np.testing.assert_array_equal(out.terminated, (env.i == 0) & live)
        np.testing.assert_allclose(out.obs[live, 3], age[live] / 30, rtol=1e-6)
        prev_done = out.terminated | out.truncated
        ends["terminated"] += int(out.terminated.sum())
        ends["truncated"] += int(out.truncated.sum())
    # two initial cases: some outbreaks fizzle out (terminated), the rest outlast 30 days
    assert ends["terminated"] > 0 and ends["truncated"] > 0, ends


@pytest.mark.parametrize("method", METHODS)
def test_seeded_and_copy_i_uses_seed_plus_i(method: str) -> None:
    actions = np.random.default_rng(1).integers(0, 3, 60)

    def run(seed: int, n: int) -> np.ndarray:
        env = EpidemicBatchEnv(n, seed=seed, population=400, method=method, horizon=40)
        env.reset()
        return np.stack([env.step(np.full(n, a)).obs[-1] for a in actions])

    same = run(20, 3)
    np.testing.assert_array_equal(same, run(20, 3))
    np.testing.assert_array_equal(same, run(22, 1))  # copy 2 of seed 20 is copy 0 of seed 22
    assert not np.array_equal(same, run(21, 1))


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="method"):
        EpidemicBatchEnv(1, method="euler")
    with pytest.raises(ValueError, match="initial_infected"):
        EpidemicBatchEnv(1, population=10, initial_infected=11)
    env = EpidemicBatchEnv(2)
    env.reset()
    with pytest.raises(ValueError, match="0, 1 or 2"):
        env.step(np.array([0, 3]))


@pytest.mark.parametrize("method", METHODS)
def test_ending_on_the_last_day_is_termination(method: str) -> None:
    """Everyone recovers on day 1 (gamma = 50/day) with horizon 1: terminated, not truncated."""
    env = EpidemicBatchEnv(4, seed=0, beta=0.0, gamma=50.0, method=method, horizon=1)
    env.reset()
    out = env.step(np.zeros(4, np.int64))
    assert out.terminated.all() and not out.truncated.any()
    np.testing.assert_allclose(out.obs[:, 1], 0.0)
