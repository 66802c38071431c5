"""heat/heat2d: the physics of the C+MPI code, its coupling, and a rank killed mid-episode."""

from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("zmq", reason="pyzmq is not installed: pip install 'mtrl[external]'")
if shutil.which("gcc") is None:
    pytest.skip("no gcc: the MPI simulation is compiled with mpicc (gcc)", allow_module_level=True)

from mtrl.plugins import get_plugins, make_env

ENV = "heat/heat2d"


def _heat_processes() -> set[int]:
    out = set()
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                cmd = Path(f"/proc/{e}/cmdline").read_bytes()
                state = Path(f"/proc/{e}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if b"heat2d" in cmd and b"launcher.py" not in cmd and state != "Z":
                out.add(int(e))
    return out


def _rank(pid: int) -> int | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for kv in env:
        if kv.startswith(b"PMI_RANK="):
            return int(kv[9:])
    return None


@pytest.fixture(scope="module", autouse=True)
def _plugin_loaded() -> None:
    if ENV not in get_plugins().envs:
        pytest.skip("mtrl-heat is not installed (pip install ./plugins_contrib/mtrl-heat)")


def test_first_sine_mode_decays_at_the_discrete_and_analytic_rate() -> None:
    n, alpha, dt = 32, 0.1, 0.05
    env = make_env(ENV, 1, seed=0, n=n, ranks=2, init="sine")
    try:
        u = [env.reset()[0, :16]]
        for _ in range(5):
            u.append(env.step(np.zeros((1, 4), np.float32)).obs[0, :16])
    finally:
        env.close()
    h = 1.0 / (n + 1)
    substeps = math.ceil(alpha * dt / (0.2 * h * h))
    r = alpha * (dt / substeps) / h**2
    g = (1.0 - 8.0 * r * math.sin(math.pi * h / 2) ** 2) ** substeps  # FTCS, exact for the mode
    ratios = np.array(u[1:]) / np.array(u[:-1])
    np.testing.assert_allclose(ratios, g, rtol=2e-6)
    assert abs(g / math.exp(-2 * math.pi**2 * alpha * dt) - 1) < 2e-3  # O(h^2 + tau)


def test_one_two_and_four_ranks_compute_the_same_fields() -> None:
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (12, 2, 4)).astype(np.float32)
    runs = []
    for ranks in (1, 2, 4):
        env = make_env(ENV, 2, seed=5, ranks=ranks, horizon=8)
        try:
            out = [env.reset()]
            for a in actions:
                b = env.step(a)
                out += [b.obs, b.reward, b.truncated]
        finally:
            env.close()
        runs.append(out)
    for other in runs[1:]:
        for x, y in zip(runs[0], other, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-7)
    assert any(t.all() for t in runs[0][3::3]), "horizon=8 truncates every copy"


def test_heaters_drive_the_field_toward_the_target() -> None:
    """A proportional controller on the sensors' error (each heater fed its quadrant's mean
    error) loses less than half of what doing nothing loses: the task is controllable."""
    env = make_env(ENV, 2, seed=1, ranks=2)
    rewards_zero, rewards_p = [], []
    try:
        obs = env.reset()
        for _ in range(60):
            err = (obs[:, 16:32] - obs[:, :16]).reshape(2, 4, 4)
            quad = np.stack(
                [
                    err[:, :2, :2].mean((1, 2)),
                    err[:, :2, 2:].mean((1, 2)),
                    err[:, 2:, :2].mean((1, 2)),
                    err[:, 2:, 2:].mean((1, 2)),
                ],
                axis=1,
            )
            b = env.step(np.clip(8 * quad, -1, 1).astype(np.float32))
            obs = b.obs
            rewards_p.append(b.reward)
    finally:
        env.close()
    env = make_env(ENV, 2, seed=1, ranks=2)
    try:
        env.reset()
        for _ in range(60):
            rewards_zero.append(env.step(np.zeros((2, 4), np.float32)).reward)
    finally:
        env.close()
    assert np.sum(rewards_p) > 0.5 * np.sum(rewards_zero)


def test_conforms_to_the_batch_env_contract() -> None:
    from mtrl.testing import check_env

    check_env(ENV, num_envs=2, steps=25, env_kwargs={"horizon": 10, "ranks": 1}, spawn=False)


def test_a_rank_killed_mid_episode_is_a_counted_fault_restarted_without_orphans() -> None:
    from mtrl.testing import fault_drill

    before, killed = _heat_processes(), []

    def kill_rank_1() -> None:
        ranks = {p: _rank(p) for p in _heat_processes() - before}
        victim = [p for p, r in ranks.items() if r == 1]
        assert victim, f"rank 1 of the simulation is running: {ranks}"
        os.kill(victim[0], 9)
        killed.append(victim[0])

    drill = fault_drill(ENV, 2, kill_rank_1, env_kwargs={"ranks": 2, "horizon": 20})
    f = drill.faults
    assert killed and f.faults == 1 and f.restarts == 1, f
    assert f.by_kind["raise"] == 1 and "SimulationCrashed" in drill.events[0].text, drill.events
    assert drill.unrolls_after is not None and drill.unrolls_after >= 2, "the actor delivers"
    deadline = time.monotonic() + 10
    while _heat_processes() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _heat_processes() - before, "no rank outlives the run"


def test_a_rank_killed_in_one_job_of_several_restarts_that_job_alone() -> None:
    """One MPI job per copy (``copies_per_process: 1``): the fault drill kills rank 1 of one
    job; that job alone restarts (a member fault), the actor is never restarted."""
    from mtrl.testing import fault_drill

    before, killed = _heat_processes(), []

    def kill_one_rank_1() -> None:
        ranks = {p: _rank(p) for p in _heat_processes() - before}
        victim = sorted(p for p, r in ranks.items() if r == 1)
        assert len(victim) == 3, f"rank 1 of each of the three jobs runs: {ranks}"
        os.kill(victim[0], 9)
        killed.append(victim[0])

    kwargs = {"ranks": 2, "horizon": 20, "copies_per_process": 1}
    drill = fault_drill(ENV, 3, kill_one_rank_1, env_kwargs=kwargs, unrolls_after=4)
    assert killed and drill.faults.faults == 0 and drill.faults.restarts == 0, drill.faults
    (fault,) = drill.member_faults
    assert fault[3] == "exit" and not fault[5], fault
    assert drill.unrolls_after is not None and drill.unrolls_after >= 4, "the actor delivers"
