"""Simulations that crash, hang, disconnect, report errors or send NaN; no orphan processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid

import numpy as np
import pytest

from mtrl.actors.runner import EnvStepper, NonFiniteError
from mtrl.actors.unroll import UnrollBuffer
from mtrl.plugins.external import (
    ExternalSim,
    SimulationCommandError,
    SimulationCrashed,
    SimulationDisconnected,
    SimulationReportedError,
    SimulationTimeout,
)
from tests.external.conftest import PY_SIM, sim_processes, wait_gone


def _marked(fault: str, at: int = 3, children: int = 2, **kw) -> tuple[ExternalSim, str]:
    """A sim that misbehaves at its ``at``-th step, with ``children`` pretend ranks. A unique
    marker in its command line (a ``-X`` option, which Python ignores) finds its processes."""
    marker = uuid.uuid4().hex[:10]
    cmd = f"{{python}} -X mtrl_marker={marker} " + PY_SIM.split(" ", 1)[1]
    cmd += f" --fault {fault} --at {at} --children {children}"
    return ExternalSim(command=cmd, **kw), marker


@pytest.mark.parametrize(
    ("fault", "error", "match"),
    [
        ("crash", SimulationCrashed, "exited with status 3"),
        ("error", SimulationReportedError, "the solver diverged"),
        ("close", SimulationDisconnected, "disconnected"),
        ("hang", SimulationTimeout, "no answer to STEP within 1s"),
    ],
)
def test_a_failing_simulation_raises_and_leaves_no_process(fault, error, match) -> None:
    sim, marker = _marked(fault, step_timeout_s=1.0, heartbeat_s=0.2)
    env = sim(num_envs=2, seed=0)
    try:
        env.reset()
        assert len(sim_processes(marker, launchers=False)) == 3, (
            "the sim and its two pretend ranks run"
        )
        with pytest.raises(error, match=match):
            for _ in range(5):
                env.step(np.zeros((2, 1), np.float32))
    finally:
        env.close()
    assert not wait_gone(marker, set(), timeout=5), "every process of the simulation ended"


def test_nan_from_a_simulation_is_the_actors_nan_fault() -> None:
    sim, _ = _marked("nan", at=2, children=0)
    env = sim(num_envs=2, seed=0)
    try:
        stepper = EnvStepper(env, 1.0, "drift")
        buf = UnrollBuffer.allocate(0, 4, 2, env.single_observation_space, env.single_action_space)
        stepper.start(buf)

        def act(b: UnrollBuffer, t: int) -> None:
            b.actions[t] = 0.0

        with pytest.raises(NonFiniteError, match=r"non-finite reward nan at step 1"):
            stepper.fill(buf, act)
    finally:
        env.close()


def test_a_command_that_cannot_start_fails_at_build_before_launching() -> None:
    with pytest.raises(SimulationCommandError, match="command not found: '/nonexistent/solver'"):
        ExternalSim(command="/nonexistent/solver {address}", start_timeout_s=10)(1, 0)


def test_kill_9_of_the_process_that_owns_the_env_leaves_no_orphans() -> None:
    marker = uuid.uuid4().hex[:10]
    code = textwrap.dedent(f"""
        import sys, time
        from mtrl.plugins.external import ExternalSim
        sim = ExternalSim(command="{{python}} -X mtrl_marker={marker} {PY_SIM.split(" ", 1)[1]}"
                          " --children 2", copies_per_process=1)
        env = sim(num_envs=2, seed=0)
        env.reset()
        print("ready", flush=True)
        time.sleep(60)
    """)
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "ready"
        assert len(sim_processes(marker, launchers=False)) == 6, (
            "two sims with two pretend ranks each"
        )
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
        assert not wait_gone(marker, set(), timeout=10), "the launchers ended every rank"
    finally:
        if owner.poll() is None:
            owner.kill()
