"""One simulation process of a batch env fails: it restarts alone, or is quarantined alone.

Real launched codes (the Python and C drift simulations, the C + MPI heat code of the
``mtrl-heat`` plugin), members killed with SIGKILL mid-run. Every timing-dependent check polls
for its condition with a generous limit.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from mtrl.actors.runner import EnvStepper
from mtrl.actors.unroll import UnrollBuffer
from mtrl.coupling.launcher import descendants
from mtrl.plugins.external import ExternalSim, SimulationError
from mtrl.plugins.external.members import QUARANTINED, UP, MemberPolicy
from tests.external.conftest import PY_SIM

LIMIT_S = 120.0  # generous: the machine may be loaded


def _python_sim(**kw) -> ExternalSim:
    return ExternalSim(command=PY_SIM, copies_per_process=1, step_timeout_s=10.0, **kw)


def _c_sim(binary: Path) -> ExternalSim:
    return ExternalSim(command=f"{binary} {{address}}", copies_per_process=1, step_timeout_s=10.0)


def _heat_sim() -> ExternalSim:
    from mtrl.plugins import get_plugins

    try:
        spec = get_plugins().envs.get("heat/heat2d")
    except Exception as e:  # the plugin or MPI is not installed
        pytest.skip(f"heat/heat2d is not available: {e}")
    return dataclasses.replace(spec.make, copies_per_process=1)


def _leaf(root: int) -> int:
    """The deepest process under launcher ``root`` (the solver; an MPI rank)."""
    procs = descendants(root)
    assert procs, "the member's processes run"
    return procs[-1]


class Driver:
    """Steps a batch env and counts, per copy, the genuine (valid) steps it made."""

    def __init__(self, env) -> None:
        self.env = env
        self.valid_steps = np.zeros(env.num_envs, np.int64)
        self.faults: list = []
        self.cut: list[tuple[int, np.ndarray]] = []  # (step, copies truncated while invalid)
        self.t = 0
        self.actions = np.zeros((env.num_envs, *env.single_action_space.shape), np.float32)

    def step(self) -> np.ndarray:
        out = self.env.step(self.actions)
        valid = np.ones(self.env.num_envs, bool) if out.valid is None else out.valid
        self.valid_steps += valid
        if (out.truncated & ~valid).any():
            self.cut.append((self.t, np.flatnonzero(out.truncated & ~valid)))
        self.faults += self.env.pop_member_faults()
        self.t += 1
        assert np.isfinite(out.obs).all() and np.isfinite(out.reward).all()
        return valid

    def until(self, condition, what: str) -> None:
        deadline = time.monotonic() + LIMIT_S
        while not condition():
            assert time.monotonic() < deadline, f"not within {LIMIT_S:g}s: {what}"
            self.step()


def _kill_and_recover(env, victim: int) -> Driver:
    """Kill member ``victim``'s solver with SIGKILL mid-run, step until it is up again."""
    d = Driver(env)
    env.reset()
    for _ in range(3):
        d.step()
    os.kill(_leaf(env.pids()[victim]), signal.SIGKILL)
    d.until(lambda: d.faults, "the kill is seen")
    assert env.members[victim].state != UP
    down_at = d.valid_steps.copy()
    d.until(lambda: env.members[victim].state == UP, "the member is up again")
    others = [k for k in range(env.num_envs) if k != victim]
    ((member, start, stop, kind), *_) = [(f.member, f.start, f.stop, f.kind) for f in d.faults]
    assert (member, start, stop) == (victim, victim, victim + 1)
    assert kind == "exit"
    assert d.cut and d.cut[0][1].tolist() == [victim], "its episode is reported truncated"
    assert (d.valid_steps[others] > down_at[others]).all(), (
        "the other members kept stepping while it restarted"
    )
    assert d.valid_steps[victim] == down_at[victim], "nothing of it counted while it was down"
    before = d.valid_steps[victim]
    for _ in range(5):
        d.step()
    assert d.valid_steps[victim] > before, "its slot steps again after a fresh reset"
    assert env.members[victim].restarts == 1
    return d


def test_a_killed_python_member_restarts_alone_while_the_others_step() -> None:
    env = _python_sim()(num_envs=4, seed=0)
    try:
        assert env.member_restart
        d = _kill_and_recover(env, victim=1)
        assert len(d.faults) == 1 and "SIGKILL" in d.faults[0].text
    finally:
        env.close()


def test_a_killed_c_member_restarts_alone(c_drift_sim: Path) -> None:
    env = _c_sim(c_drift_sim)(num_envs=3, seed=0)
    try:
        _kill_and_recover(env, victim=2)
    finally:
        env.close()


def test_a_killed_rank_of_an_mpi_member_restarts_that_job_alone() -> None:
    env = _heat_sim()(num_envs=3, seed=0, ranks=2, n=16)
    try:
        assert len(env.pids()) == 3, "one MPI job per copy"
        _kill_and_recover(env, victim=0)
    finally:
        env.close()


def test_a_member_that_always_crashes_is_quarantined_alone() -> None:
    sim = ExternalSim(
        command=PY_SIM + " --fault crash --at 1 --only 4:2",
        copies_per_process=1,
        step_timeout_s=10.0,
    )
    env = sim(num_envs=4, seed=0, member_max_restarts=2)
    try:
        d = Driver(env)
        env.reset()
        d.until(lambda: env.members[2].state == QUARANTINED, "the member is quarantined")
        kinds = [(f.member, f.kind, f.quarantined) for f in d.faults]
        assert kinds == [(2, "exit", False), (2, "exit", False), (2, "exit", True)]
        steps = d.valid_steps.copy()
        for _ in range(30):
            valid = d.step()
            assert valid.tolist() == [True, True, False, True] or d.t % 20 < 2
        assert d.valid_steps[2] == steps[2], "nothing of the quarantined member counts"
        assert (d.valid_steps[[0, 1, 3]] > steps[[0, 1, 3]]).all()
    finally:
        env.close()


def test_a_member_returning_nan_is_restarted_and_nothing_non_finite_escapes() -> None:
    sim = ExternalSim(command=PY_SIM + " --fault nan --at 2 --only 3:1", copies_per_process=1)
    env = sim(num_envs=3, seed=0, member_max_restarts=1)
    try:
        d = Driver(env)
        env.reset()
        d.until(lambda: env.members[1].state == QUARANTINED, "the NaN member is quarantined")
        assert [f.kind for f in d.faults] == ["nan", "nan"]
    finally:
        env.close()


def test_member_restart_feeds_unrolls_of_constant_shape_with_masked_steps() -> None:
    env = _python_sim()(num_envs=3, seed=0)
    try:
        stepper = EnvStepper(env, 1.0, "drift")
        buf = UnrollBuffer.allocate(0, 8, 3, env.single_observation_space, env.single_action_space)
        stepper.start(buf)

        def act(b: UnrollBuffer, t: int) -> None:
            b.actions[t] = 0.0

        stepper.fill(buf, act)
        os.kill(_leaf(env.pids()[0]), signal.SIGKILL)
        faults: list = []
        deadline = time.monotonic() + LIMIT_S
        while not faults or env.members[0].state != UP:
            assert time.monotonic() < deadline
            EnvStepper.carry(buf, buf)
            stepper.fill(buf, act)
            faults += stepper.drain_member_faults()
            assert buf.obs.shape == (9, 3, 2) and np.isfinite(buf.obs).all()
        assert faults[0][:4] == (0, 0, 1, "exit")
        returns, lengths, _ = stepper.episodes.drain()
        assert len(returns) == len(lengths) >= 1, "the cut episode is recorded as ended"
    finally:
        env.close()


def test_member_restart_off_fails_the_whole_batch_env_as_before() -> None:
    env = _python_sim()(num_envs=2, seed=0, member_restart=False)
    try:
        assert not env.member_restart
        env.reset()
        env.step(np.zeros((2, 1), np.float32))
        os.kill(_leaf(env.pids()[0]), signal.SIGKILL)
        with pytest.raises(SimulationError):
            deadline = time.monotonic() + LIMIT_S
            while time.monotonic() < deadline:
                env.step(np.zeros((2, 1), np.float32))
    finally:
        env.close()


def test_member_policy_refuses_bad_values() -> None:
    with pytest.raises(ValueError, match="member_max_restarts"):
        MemberPolicy.from_kwargs({"member_max_restarts": -1})
    with pytest.raises(ValueError, match="member_restart must be true or false, got 'no'"):
        MemberPolicy.from_kwargs({"member_restart": "no"})
    with pytest.raises(ValueError, match="member_window_s"):
        MemberPolicy.from_kwargs({"member_window_s": 0})
    kwargs = {"member_restart": False, "other": 1}
    assert MemberPolicy.from_kwargs(kwargs) == MemberPolicy(restart=False)
    assert kwargs == {"other": 1}


def test_a_hung_member_is_a_hang_fault_restarted_alone() -> None:
    sim = ExternalSim(
        command=PY_SIM + " --fault hang --at 3 --only 3:1",
        copies_per_process=1,
        step_timeout_s=1.0,
    )
    env = sim(num_envs=3, seed=0, member_max_restarts=5)
    try:
        d = Driver(env)
        env.reset()
        d.until(lambda: d.faults, "the hang is seen")
        assert [(f.member, f.kind) for f in d.faults] == [(1, "hang")]
        assert "no answer to STEP within 1s" in d.faults[0].text
        d.until(lambda: env.members[1].state == UP, "the member is up again")
    finally:
        env.close()
