"""Attached codes that join a running batch env late and leave it early (goodbye or SIGKILL).

Real processes: drift simulations behind the Python client, announcing themselves in the env's
``members_dir``. Every timing-dependent check waits for its condition with a generous limit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mtrl.plugins.external import ExternalSim
from mtrl.plugins.external.roster import JOIN, LEAVE, VANISHED, MembersBelowMinimum
from tests.external.conftest import HERE

LIMIT_S = 120.0


def _code(folder: Path, tmp: Path, name: str, *extra: str) -> subprocess.Popen:
    """A drift simulation bound to its own ipc address, announced in ``folder``."""
    cmd = [sys.executable, str(HERE / "drift_sim.py"), f"ipc://{tmp}/{name}.sock"]
    cmd += ["--announce", str(folder), *extra]
    root = str(Path(__file__).resolve().parents[2])  # this checkout's mtrl
    env = {**os.environ, "PYTHONPATH": root}
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


class Run:
    """Steps the env, counting each copy's valid steps and the member events."""

    def __init__(self, env) -> None:
        self.env = env
        self.valid = np.zeros(env.num_envs, np.int64)
        self.events: list = []

    def step(self) -> None:
        out = self.env.step(np.zeros((self.env.num_envs, 1), np.float32))
        assert out.valid is not None
        self.valid += out.valid
        assert (out.reward[~out.valid] == 0).all()
        self.events += self.env.pop_member_events()

    def until(self, cond, what: str) -> None:
        end = time.monotonic() + LIMIT_S
        while not cond():
            assert time.monotonic() < end, f"timed out waiting for {what}: {self.events}"
            self.step()


@pytest.fixture
def codes(tmp_path):
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)


def test_members_join_late_and_leave(tmp_path, codes):
    folder = tmp_path / "members"
    codes.append(_code(folder, tmp_path, "a"))
    sim = ExternalSim(members_dir=str(folder), step_timeout_s=20.0)
    env = sim(3, seed=0, min_members=1, max_members=3, member_grace_s=60.0)
    try:
        env.reset()
        run = Run(env)
        assert env.members_present == 1
        for _ in range(5):
            run.step()
        assert run.valid[1:].sum() == 0, "empty slots yield no transitions"
        assert run.valid[0] == 5
        codes.append(_code(folder, tmp_path, "c"))
        run.until(lambda: env.members_present == 2, "the second code to join")
        codes.append(_code(folder, tmp_path, "b", "--fault", "goodbye", "--at", "15"))
        run.until(lambda: env.members_present == 3, "the third code to join")
        assert [e.kind for e in run.events].count(JOIN) == 3
        joined = {e.member: e for e in run.events if e.kind == JOIN}
        b = next(k for k, e in joined.items() if "b.sock" in e.text)
        c = next(k for k, e in joined.items() if "c.sock" in e.text)
        run.until(lambda: any(e.kind == LEAVE for e in run.events), "the goodbye")
        assert env.members_present == 2
        steps_b = run.valid[b]
        assert steps_b == 14, "the leaving code's 15th step is cut, not a transition"
        os.kill(codes[1].pid, signal.SIGKILL)  # c
        run.until(lambda: any(e.kind == VANISHED for e in run.events), "the killed code")
        assert env.members_present == 1
        before = run.valid.copy()
        for _ in range(5):
            run.step()
        assert run.valid[b] == before[b] and run.valid[c] == before[c], "absent: no steps"
        assert run.valid[0] == before[0] + 5
        assert not (folder / "c.claim").exists()
        assert [e.member for e in run.events if e.kind == VANISHED] == [c]
    finally:
        env.close()


def test_below_minimum_past_grace_fails_the_env(tmp_path, codes):
    folder = tmp_path / "members"
    codes.append(_code(folder, tmp_path, "a", "--fault", "goodbye", "--at", "3"))
    sim = ExternalSim(members_dir=str(folder), step_timeout_s=20.0)
    env = sim(2, seed=0, min_members=1, max_members=2, member_grace_s=1.0)
    try:
        env.reset()
        run = Run(env)
        with pytest.raises(MembersBelowMinimum, match="below min_members=1"):
            run.until(lambda: False, "the minimum to be missed")
    finally:
        env.close()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_members": 3, "max_members": 2}, "must not exceed"),
        ({"min_members": 0}, "min_members must be an int >= 1"),
        ({"max_members": 3}, "must divide num_envs"),
        ({"member_grace_s": 0}, "member_grace_s must be a number > 0"),
    ],
)
def test_bad_bounds_refused(tmp_path, kwargs, match):
    sim = ExternalSim(members_dir=str(tmp_path))
    assert match in (sim.members_problem(kwargs, 4) or "")
    with pytest.raises(ValueError, match=match):
        sim(4, seed=0, **kwargs)


def test_a_claim_whose_process_is_gone_is_taken_back(tmp_path):
    from mtrl.coupling import announce

    path = announce.announce(tmp_path, "ipc:///nowhere", name="x")
    claimer = "from pathlib import Path; from mtrl.coupling import announce; "
    claimer += f"assert announce.claim(Path({str(path)!r}))"
    root = str(Path(announce.__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root}
    subprocess.run([sys.executable, "-c", claimer], check=True, env=env)  # claims, exits
    assert (tmp_path / "x.claim").exists()
    assert announce.unclaimed(tmp_path) == [path]
    assert announce.claim(path) == "ipc:///nowhere"
    assert announce.unclaimed(tmp_path) == []  # held by this live process
