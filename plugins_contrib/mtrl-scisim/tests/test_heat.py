"""Physics and contract tests of scisim/heat1d and its batched tridiagonal solver."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("mtrl_scisim") is None:  # pragma: no cover - install hint
    pytest.skip(
        "mtrl-scisim is not installed: pip install -e plugins_contrib/mtrl-scisim",
        allow_module_level=True,
    )

from mtrl_scisim.heat import Heat1DBatchEnv, HeatEquation1D
from mtrl_scisim.tridiagonal import ConstantTridiagonal

from mtrl.testing import check_env

ALPHA = 0.1


def test_conformance() -> None:
    report = check_env("scisim/heat1d", num_envs=3, steps=60, env_kwargs={"horizon": 20})
    # every copy is truncated at step indices 19 and 40 (20 steps, then a reset step)
    assert report.episode_ends == 2 * 3
    assert "spawn" in report.checks


@pytest.mark.parametrize("coeffs", [(-1.0, 2.0, -1.0), (-0.3, 1.6, -0.7), (2.0, -5.0, 1.5)])
def test_thomas_matches_dense_solve(coeffs: tuple[float, float, float]) -> None:
    n = 37
    lower, diag, upper = coeffs
    system = ConstantTridiagonal(n, lower, diag, upper)
    dense = np.diag(np.full(n, diag)) + np.diag(np.full(n - 1, lower), -1)
    dense += np.diag(np.full(n - 1, upper), 1)
    rhs = np.random.default_rng(0).normal(size=(n, 5))
    expected = np.linalg.solve(dense, rhs)
    got = system.solve(rhs.copy())
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(system.matvec(got), rhs, atol=1e-10)


def test_thomas_rejects_non_dominant_matrix() -> None:
    with pytest.raises(ValueError, match="diagonally dominant"):
        ConstantTridiagonal(5, 1.0, 1.0, 1.0)


@pytest.mark.parametrize(
    ("scheme", "n", "rtol"),
    [("crank_nicolson", 64, 1e-3), ("crank_nicolson", 256, 1e-3), ("backward_euler", 64, 6e-2)],
)
def test_first_sine_mode_decays_at_the_analytic_rate(scheme: str, n: int, rtol: float) -> None:
    """u0 = sin(pi x) stays a sine and decays as exp(-alpha pi^2 t) (to the scheme's order)."""
    pde = HeatEquation1D(n, ALPHA, dt=0.05, substeps=1, scheme=scheme)
    u = pde.zeros(1)
    u[1:-1, 0] = np.sin(np.pi * pde.x)
    zero = np.zeros((n, 1))
    for _ in range(40):  # t = 2
        pde.advance(u, zero)
    exact = np.exp(-ALPHA * np.pi**2 * 2.0)
    np.testing.assert_allclose(u[1:-1, 0], exact * np.sin(np.pi * pde.x), rtol=rtol, atol=0)
    if scheme == "backward_euler":
        # first order: decays visibly slower than the PDE, so the test can tell the schemes apart
        assert u[1:-1, 0].max() > exact * 1.02


def test_zero_control_decays_monotonically_to_zero() -> None:
    env = Heat1DBatchEnv(6, seed=1, horizon=400)
    env.reset()
    norms = [env.pde.l2_norm(env.field)]
    for _ in range(200):  # t = 10, ~10 e-folding times of the slowest mode
        env.step(np.zeros((6, 4), np.float32))
        norms.append(env.pde.l2_norm(env.field))
    norms = np.asarray(norms)
    assert (norms[0] > 0.01).all()
    assert (np.diff(norms, axis=0) < 0).all()
    assert (norms[-1] < 1e-3 * norms[0]).all()


def test_a_heater_injects_heat_into_the_rod() -> None:
    """d/dt int u = int f - boundary flux: one step from the same state gains ~dt * int f."""
    dt, gain = 0.05, 3.0
    envs = [Heat1DBatchEnv(1, seed=4, dt=dt, gain=gain) for _ in range(3)]
    for env in envs:
        env.reset()
    setting = [0.0, 1.0, -1.0]
    for env, s in zip(envs, setting, strict=True):
        env.step(np.array([[0.0, s, 0.0, 0.0]], np.float32))
    heat = [env.pde.integral(env.field)[0] for env in envs]
    injected = dt * envs[0].pde.h * envs[0].profiles[:, 1].sum()  # dt * int gain b_1 dx
    gained = heat[1] - heat[0]
    assert 0.9 * injected < gained <= injected  # a little leaks out through the cold ends
    np.testing.assert_allclose(heat[0] - heat[2], gained, rtol=1e-9)  # linear: cooling mirrors


def test_holding_the_target_setting_reaches_the_target() -> None:
    env = Heat1DBatchEnv(3, seed=2, horizon=500, action_cost=0.01)
    env.reset()
    for _ in range(400):  # t = 20
        out = env.step(env.target_controls.astype(np.float32))
    np.testing.assert_allclose(env.field[1:-1], env.target, atol=1e-6)
    cost = 0.01 * (env.target_controls.astype(np.float32).astype(float) ** 2).sum(axis=1)
    np.testing.assert_allclose(out.reward, -cost, rtol=1e-4)
    m = env.sensors.positions.size
    np.testing.assert_allclose(out.obs[:, :m], out.obs[:, m : 2 * m], atol=1e-5)


def test_large_grid_keeps_the_spaces() -> None:
    small = Heat1DBatchEnv(2, seed=0)
    big = Heat1DBatchEnv(2, seed=0, n=16384, substeps=2)
    assert big.single_observation_space == small.single_observation_space
    assert big.single_action_space == small.single_action_space
    obs = big.reset()
    out = big.step(np.full((2, 4), 0.5, np.float32))
    assert obs.shape == out.obs.shape == (2, 33)
    assert big.field.shape == (16386, 2) and np.isfinite(big.field).all()
    # the same physics at two resolutions: targets agree at the sensors to discretisation error
    np.testing.assert_allclose(obs[:, 16:32], small.reset()[:, 16:32], atol=1e-3)


def test_copy_i_uses_seed_plus_i_and_actions_are_clipped() -> None:
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (30, 3, 4)).astype(np.float32)
    a, b = Heat1DBatchEnv(3, seed=5, horizon=10), Heat1DBatchEnv(1, seed=7, horizon=10)
    np.testing.assert_array_equal(a.reset()[2], b.reset()[0])
    for act in actions:
        out_a, out_b = a.step(act), b.step(act[2:])
        np.testing.assert_array_equal(out_a.obs[2], out_b.obs[0])
        np.testing.assert_array_equal(out_a.reward[2], out_b.reward[0])
    c, d = Heat1DBatchEnv(1, seed=0), Heat1DBatchEnv(1, seed=0)
    c.reset()
    d.reset()
    np.testing.assert_array_equal(
        c.step(np.full((1, 4), 7.0, np.float32)).obs, d.step(np.ones((1, 4), np.float32)).obs
    )
    with pytest.raises(ValueError, match="non-finite"):
        c.step(np.full((1, 4), np.nan, np.float32))
    with pytest.raises(ValueError, match="shape"):
        c.step(np.zeros((2, 4), np.float32))
