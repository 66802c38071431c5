"""``mtrl train`` on attached codes that join and leave during the run, and ``mtrl validate``
/ ``mtrl train`` on member bounds that cannot hold (one line, exit 2).

Real processes: the trainer, and drift simulations behind the Python client that announce
themselves in the task's ``members_dir``: a second and a third join late, one says goodbye,
one is killed with SIGKILL, and the run finishes. Every wait is on its condition, with a
generous limit.
"""

from __future__ import annotations

import contextlib
import csv
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import mtrl
from tests.external.conftest import HERE, install_plugin

LIMIT_S = 300.0
ROOT = Path(mtrl.__file__).resolve().parents[1]

PLUGIN = """
import gymnasium as gym
import numpy as np

from mtrl.plugins import hookimpl
from mtrl.plugins.external import ExternalSim

OBS = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
ACT = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


@hookimpl
def mtrl_register_envs(register):
    sim = ExternalSim(members_dir="/nonexistent/members", step_timeout_s=30.0)
    register.env("drift", sim, observation_space=OBS, action_space=ACT)
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_plugin(tmp_path_factory.mktemp("site"), "joiners", PLUGIN)


def _environ(site: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MTRL_")}
    environ["PYTHONPATH"] = f"{site}{os.pathsep}{ROOT}"
    environ["MTRL_PLUGINS"] = "joiners"
    return environ


def _mtrl(site: Path, command: str, cfg: Path) -> subprocess.CompletedProcess[str]:
    """``mtrl COMMAND CFG`` in a process of its own, with the ``joiners`` plugin."""
    return subprocess.run(
        [sys.executable, "-m", "mtrl.cli", command, str(cfg)],
        capture_output=True,
        text=True,
        env=_environ(site),
        timeout=LIMIT_S,
    )


def _config(path: Path, kwargs: str, steps: int = 1200, evaluate: int = 0) -> Path:
    path.write_text(
        f"name: joiners\ntotal_env_steps: {steps}\ntasks:\n  - env: joiners/drift\n"
        f"    num_envs: 3\n    env_kwargs: {kwargs}\n"
        "scheduler: {num_actors: 1}\n"
        "learner: {batch_size: 3, unroll_length: 16}\n"
        f"tracking: {{run_dir: {path.parent / 'runs'}, console: quiet, csv: true, "
        f"wandb: {{mode: disabled}}, final_eval_episodes: {evaluate}}}\n"
    )
    return path


def _code(folder: Path, tmp: Path, name: str, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, str(HERE / "drift_sim.py"), f"ipc://{tmp}/{name}.sock"]
    return subprocess.Popen(
        [*cmd, "--announce", str(folder), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _c_code(binary: Path, folder: Path, *extra: str) -> subprocess.Popen:
    """The C drift simulation as a member that announces itself in ``folder``
    (``mtrl_sim_announce``)."""
    return subprocess.Popen(
        [str(binary), "--announce", str(folder), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _train(site: Path, cfg: Path) -> subprocess.Popen:
    """``mtrl train CFG`` started, its output piped (read it with :class:`Lines`)."""
    return subprocess.Popen(
        [sys.executable, "-m", "mtrl.cli", "train", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_environ(site),
    )


def _end(train: subprocess.Popen, codes: list[subprocess.Popen]) -> None:
    """Kill what still runs of the trainer and the codes, and reap them."""
    if train.poll() is None:
        train.kill()
    for p in codes:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)


def _last_metrics(tmp_path: Path) -> dict[str, str]:
    """Each metric's last value in the run's metrics.csv."""
    rows = list(csv.DictReader(next(tmp_path.glob("runs/*/metrics.csv")).open()))
    return {k: v for row in rows for k, v in row.items() if v not in ("", None)}


class Lines:
    """The trainer's output lines, read as they come."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.seen: list[str] = []
        self._q: queue.Queue = queue.Queue()
        self._threads = [
            threading.Thread(target=self._read, args=(stream,), daemon=True)
            for stream in (proc.stdout, proc.stderr)
        ]
        for t in self._threads:
            t.start()

    def _read(self, stream) -> None:
        for line in stream:
            self._q.put(line.rstrip("\n"))

    def rest(self) -> str:
        """Every line, once the process ended."""
        for t in self._threads:
            t.join(timeout=30)
        while not self._q.empty():
            self.seen.append(self._q.get())
        return "\n".join(self.seen)

    def wait(self, text: str, end: float) -> str:
        while True:
            found = [line for line in self.seen if text in line]
            if found:
                return found[0]
            assert time.monotonic() < end, f"no line with {text!r}:\n" + "\n".join(self.seen)
            with contextlib.suppress(queue.Empty):
                self.seen.append(self._q.get(timeout=1.0))


def test_codes_join_late_and_leave_and_the_run_finishes(site: Path, tmp_path: Path) -> None:
    folder = tmp_path / "members"
    # 3000 batch steps of at least 5 ms each: the run lasts >= 15 s, time for the codes to
    # join and leave; the test fails (it does not pass by luck) if it ended before.
    codes = [_code(folder, tmp_path, "a", "--delay", "0.005")]
    kwargs = f"{{members_dir: {folder}, min_members: 1, max_members: 3, member_grace_s: 120}}"
    cfg = _config(tmp_path / "c.yaml", kwargs, steps=9000)
    train = _train(site, cfg)
    lines = Lines(train)
    end = time.monotonic() + LIMIT_S
    try:
        lines.wait("a.sock", end)  # the first code joined at the start
        codes.append(_code(folder, tmp_path, "b", "--fault", "goodbye", "--at", "100"))
        codes.append(_code(folder, tmp_path, "c"))
        lines.wait("b.sock", end)
        lines.wait("c.sock", end)
        lines.wait("left (goodbye)", end)
        os.kill(codes[2].pid, signal.SIGKILL)
        lines.wait("vanished", end)
        train.wait(timeout=LIMIT_S)  # the run finishes on its own, with the one code left
        assert train.returncode == 0, lines.rest()
    finally:
        _end(train, codes)
    last = _last_metrics(tmp_path)
    assert float(last["task/joiners/drift/member_joins"]) == 3, last
    assert float(last["task/joiners/drift/member_leaves"]) == 1, last
    assert float(last["task/joiners/drift/member_vanished"]) == 1, last
    assert float(last["task/joiners/drift/members"]) == 1, last


def test_c_codes_announce_themselves_and_one_says_goodbye(
    site: Path, tmp_path: Path, c_drift_sim: Path
) -> None:
    """Two C codes (the C client's ``mtrl_sim_announce``) join through the members directory;
    one leaves cleanly at its 100th step (``mtrl_sim_withdraw``): a goodbye, not a fault, and
    the run goes on with the other until it is stopped."""
    folder = tmp_path / "members"
    codes = [_c_code(c_drift_sim, folder), _c_code(c_drift_sim, folder, "100")]
    kwargs = f"{{members_dir: {folder}, min_members: 1, max_members: 3, member_grace_s: 120}}"
    cfg = _config(tmp_path / "c.yaml", kwargs, steps=10_000_000)
    train = _train(site, cfg)
    lines = Lines(train)
    end = time.monotonic() + LIMIT_S
    try:
        lines.wait("left (goodbye)", end)
        train.send_signal(signal.SIGTERM)
        train.wait(timeout=LIMIT_S)
        out = lines.rest()
        assert train.returncode == 128 + signal.SIGTERM, out
    finally:
        _end(train, codes)
    assert "vanished" not in out, out
    last = _last_metrics(tmp_path)
    assert float(last["task/joiners/drift/member_joins"]) == 2, last
    assert float(last["task/joiners/drift/member_leaves"]) == 1, last
    assert float(last.get("task/joiners/drift/member_vanished", 0)) == 0, last


@pytest.mark.parametrize("command", ["validate", "train"])
@pytest.mark.parametrize("bad", ["bounds", "not a directory"])
def test_bad_member_bounds_are_refused_in_one_line(
    site: Path, tmp_path: Path, command: str, bad: str
) -> None:
    """A members_dir that is a file was a ``NotADirectoryError`` traceback (exit 1) in train."""
    folder = tmp_path / "m"
    if bad == "bounds":
        kwargs = f"{{members_dir: {folder}, min_members: 3, max_members: 2}}"
        line = "tasks[0].env: joiners/drift: min_members (3) must not exceed max_members (2)"
    else:
        folder.write_text("not a directory\n")
        kwargs = f"{{members_dir: {folder}}}"
        line = f"tasks[0].env: joiners/drift: members_dir {folder} is not a directory"
    cfg = _config(tmp_path / "c.yaml", kwargs)
    res = _mtrl(site, command, cfg)
    assert res.returncode == 2, res.stdout + res.stderr
    assert line in res.stderr
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_members_dir_no_code_made_says_so_when_train_gives_up_waiting(
    site: Path, tmp_path: Path
) -> None:
    """No code ever announced itself: one line that says the directory does not exist (a
    typo in its path, or codes pointed elsewhere), exit 2."""
    folder = tmp_path / "membres"
    cfg = _config(tmp_path / "c.yaml", f"{{members_dir: {folder}, member_grace_s: 1}}")
    res = _mtrl(site, "train", cfg)
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: every task is quarantined"), line  # its actor's env failed
    assert "0 of min_members=1 simulation codes attached within 1s" in line
    assert f"codes announce themselves in {folder} (which does not exist" in line


def test_too_few_codes_past_the_grace_stop_the_run_with_a_checkpoint(
    site: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "members"
    code = _code(folder, tmp_path, "a", "--fault", "goodbye", "--at", "100")
    kwargs = f"{{members_dir: {folder}, min_members: 1, max_members: 3, member_grace_s: 3}}"
    cfg = _config(tmp_path / "c.yaml", kwargs, steps=10_000_000)
    try:
        res = _mtrl(site, "train", cfg)
    finally:
        if code.poll() is None:
            code.kill()
        code.wait(timeout=30)
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 2, res.stderr  # why, then where the run stands
    assert "0 simulation code(s) attached, below min_members=1" in errors[0]
    assert "member_grace_s=3s" in errors[0]
    assert "checkpoint written" in errors[1] and "mtrl train --resume" in errors[1]
    assert "Traceback" not in res.stderr
    assert "left (goodbye)" in out
    assert list(tmp_path.glob("runs/*/checkpoints/*")), out
