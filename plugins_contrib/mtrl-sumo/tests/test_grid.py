"""sumo/grid3x3-v0: the signals' rules, the measurement, the baselines' programs, and SUMO
workers that crash or hang inside a process-mode actor pool (real SUMO, real processes)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("libsumo", reason="libsumo is not installed: pip install libsumo")
pytest.importorskip("sumo", reason="SUMO is not installed: pip install eclipse-sumo")

from mtrl_sumo.simulation import GridSimulation

from mtrl.plugins import get_plugins, make_env

ENV = "sumo/grid3x3-v0"


@pytest.fixture(scope="module", autouse=True)
def _plugin_loaded() -> None:
    if ENV not in get_plugins().envs:
        pytest.skip("mtrl-sumo is not installed (pip install ./plugins_contrib/mtrl-sumo)")


def _workers() -> set[int]:
    out = set()
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                cmd = Path(f"/proc/{e}/cmdline").read_bytes()
                state = Path(f"/proc/{e}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if b"mtrl_sumo.worker" in cmd and state != "Z":
                out.add(int(e))
    return out


def _episode(sim: GridSimulation, seed: int, actions: np.ndarray | None = None) -> float:
    """Play one episode with a fixed action sequence (rows per step); its halted seconds."""
    sim.reset(seed)
    done, k = False, 0
    while not done:
        row = actions[k % len(actions)] if actions is not None else np.zeros(9, np.int64)
        _, _, done = sim.step(row)
        k += 1
    assert sim.episode is not None
    return sim.episode.halted_s


def test_rewards_sum_to_minus_the_halted_vehicle_minutes_and_counts_hold() -> None:
    sim = GridSimulation(num_seconds=300)
    try:
        sim.reset(0)
        rng = np.random.default_rng(0)
        total, done, steps = 0.0, False, 0
        while not done:
            obs, rewards, done = sim.step(rng.integers(2, size=9))
            assert obs.shape == (9, 19) and rewards.shape == (9,) and (rewards <= 0).all()
            assert (obs >= 0).all() and (obs <= 1).all()
            total += float(rewards.sum())
            steps += 1
        ep = sim.episode
    finally:
        sim.close()
    assert ep is not None and steps == 60 and ep.seconds == 300
    assert total * 60 == pytest.approx(-ep.halted_s, rel=1e-5) and ep.halted_s > 0
    assert 0 < ep.arrived <= ep.departed


def test_a_switch_waits_for_min_green_and_passes_through_yellow() -> None:
    """Requests alternate NS/EW every 5 s step. The first switch waits until the green has
    lasted min_green (10 s); the yellow takes 3 s, so the new green starts at 13 s and the
    next switch is accepted at 25 s (12 s of green), not at 20 s (7 s)."""
    sim = GridSimulation(num_seconds=60, delta_time=5, yellow_time=3, min_green=10)
    greens, ready = [], []
    try:
        obs = sim.reset(3)
        assert (obs[:, 0] == 1).all() and (obs[:, 1] == 0).all() and (obs[:, 2] == 0).all()
        for k in range(6):
            obs, _, _ = sim.step(np.full(9, 1 if k % 2 == 0 else 0))
            states = {sim.sumo.trafficlight.getRedYellowGreenState(t) for t in sim.intersections}
            assert "y" not in "".join(states)  # a step ends on a green (yellow_time < delta_time)
            greens.append(int(obs[0, 1]))
            ready.append(int(obs[0, 2]))
            assert (obs[:, :3] == obs[0, :3]).all()  # every intersection got the same requests
    finally:
        sim.close()
    #          t =  5  10  15  20  25  30
    assert greens == [0, 0, 1, 1, 1, 0]
    assert ready == [0, 1, 0, 0, 1, 0]


def test_sumo_programs_ignore_actions_the_agent_does_not_and_seeds_decide_demand() -> None:
    flip = np.array([np.zeros(9, np.int64)] * 3 + [np.ones(9, np.int64)] * 3)
    for controller in ("fixed", "actuated"):
        sim = GridSimulation(controller, num_seconds=300)
        try:
            a = _episode(sim, 1, flip)
            assert _episode(sim, 1) == a  # actions play no part
            assert _episode(sim, 2) != a  # another demand draw
        finally:
            sim.close()
    sim = GridSimulation("agent", num_seconds=300)
    try:
        assert _episode(sim, 1, flip) == _episode(sim, 1, flip)
        assert _episode(sim, 1, flip) != _episode(sim, 1)
    finally:
        sim.close()


def test_actuated_signals_beat_fixed_time_on_the_shifting_demand() -> None:
    """The scenario's point: an even fixed split wastes green on the light axis."""
    halted = {}
    for controller in ("fixed", "actuated"):
        sim = GridSimulation(controller, num_seconds=900)
        try:
            halted[controller] = _episode(sim, 0)
        finally:
            sim.close()
    assert halted["actuated"] < 0.5 * halted["fixed"], halted


def test_conforms_to_the_batch_env_contract() -> None:
    from mtrl.testing import check_env

    check_env(ENV, num_envs=9, steps=30, env_kwargs={"num_seconds": 50})
    assert not _workers()


def test_slots_are_intersections_and_a_worker_that_dies_is_an_error_naming_it() -> None:
    env = make_env(ENV, 18, seed=4, num_seconds=100)
    try:
        obs = env.reset()
        assert obs.shape == (18, 19)
        pids = _workers()
        assert len(pids) == 2  # one SUMO worker per simulation of 9 slots
        env.step(np.zeros(18, np.int64))
        os.kill(sorted(pids)[0], signal.SIGKILL)
        with pytest.raises(RuntimeError, match=r"sumo/grid3x3-v0: the SUMO worker .* code -9"):
            env.step(np.zeros(18, np.int64))
    finally:
        env.close()
    assert not _workers()


def test_bad_settings_are_refused_before_a_worker_starts() -> None:
    with pytest.raises(ValueError, match="controller must be one of"):
        make_env(ENV, 9, controller="smart")
    with pytest.raises(ValueError, match="yellow_time <= delta_time"):
        make_env(ENV, 9, yellow_time=6)
    with pytest.raises(ValueError, match="multiple of 9"):
        make_env(ENV, 10)
    assert not _workers()


@pytest.mark.parametrize("fault", ["crash", "hang"])
def test_a_crashed_or_hung_simulation_is_a_counted_fault_and_the_actor_restarts(
    fault: str,
) -> None:
    """Inside a process-mode actor pool: a SUMO worker killed mid-episode is a ``raise`` fault
    (the env's error names it); one stopped mid-step (a solver that never returns) is a
    ``hang`` after the step timeout. Either way the actor restarts and delivers, and no worker
    outlives the pool: a stopped one is killed with its actor (PR_SET_PDEATHSIG)."""
    from mtrl.testing import fault_drill

    before, victims = _workers(), []

    def inject() -> None:
        (victim,) = _workers() - before
        os.kill(victim, signal.SIGKILL if fault == "crash" else signal.SIGSTOP)
        victims.append(victim)

    drill = fault_drill(ENV, 9, inject, env_kwargs={"num_seconds": 200}, step_timeout_s=5.0)
    f = drill.faults
    kind = "raise" if fault == "crash" else "hang"
    assert victims and f.faults == 1 and f.restarts == 1 and f.by_kind[kind] == 1, f
    if fault == "crash":
        assert "SUMO worker" in drill.events[0].text, drill.events
    assert drill.unrolls_after is not None and drill.unrolls_after >= 2, "the actor delivers"
    deadline = time.monotonic() + 10
    while _workers() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _workers() - before, "no SUMO worker outlives its actor"


def _python(code: str) -> str:
    """The stdout of ``python -c code`` (its SUMO workers inherit it)."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_libsumos_pyarrow_warning_is_said_only_where_pyarrow_is_loaded() -> None:
    """libsumo warns at import when the installed pyarrow differs from the Arrow it bundles;
    every SUMO worker printed it (twice a run: the actor's and the final evaluation's), though
    no worker loads pyarrow. Now only a process that has pyarrow loaded says it."""
    if "pyarrow" not in _python("import libsumo"):
        pytest.skip("no pyarrow, or one that matches libsumo's Arrow: libsumo warns of nothing")
    two_workers = (
        "from mtrl.plugins import make_env\n"
        "for seed in (0, 1):\n"
        f"    env = make_env({ENV!r}, 9, seed=seed, num_seconds=50)\n"
        "    env.reset()\n"
        "    env.close()\n"
    )
    assert "pyarrow" not in _python(two_workers)
    loaded = "import pyarrow\nfrom mtrl_sumo.simulation import import_libsumo\nimport_libsumo()"
    said = _python(loaded)
    assert said.count("Warning! pyarrow") == 1
