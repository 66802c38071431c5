"""What someone coupling their first code meets: its output kept and quoted apart from mtrl's
words, spaces checked against the registration, missing programs refused up front, slow steps
said, no launch only to learn spaces already declared, and the docs' own commands working."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from mtrl.actors.worker import fault_kind
from mtrl.config import ExperimentConfig
from mtrl.coupling import protocol as P
from mtrl.plugins import EnvSpec
from mtrl.plugins.external import (
    ExternalSim,
    SimulationCommandError,
    SimulationCrashed,
    SimulationError,
    SimulationTimeout,
    SpaceMismatchError,
)
from mtrl.plugins.external.sim_logs import LOG_DIR_ENV
from mtrl.plugins.external.spaces_check import check_size
from tests.external.conftest import HERE, PY_SIM

ROOT = HERE.parents[1]
OBS = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
ACT = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


def _spec(args: str = "", obs: gym.Space = OBS, name: str = "drift", **kw) -> EnvSpec:
    """``newcomer/<name>``: the drift simulation registered with declared spaces."""
    sim = ExternalSim(command=f"{PY_SIM} {args}", **kw)
    return EnvSpec(
        id=f"newcomer/{name}", make=sim, plugin="newcomer", _observation_space=obs,
        _action_space=ACT,
    )  # fmt: skip


def _crash(env) -> SimulationCrashed:
    env.reset()
    with pytest.raises(SimulationCrashed) as caught:
        for _ in range(5):
            env.step(np.zeros((env.num_envs, 1), np.float32))
    return caught.value


def test_the_simulations_output_is_kept_in_the_log_dir_and_quoted_apart_from_mtrls_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "sim-logs"
    monkeypatch.setenv(LOG_DIR_ENV, str(logs))
    env = _spec("--say 'solver: residual blew up' --fault crash --at 2").build(2)
    try:
        text = str(_crash(env))
    finally:
        env.close()
    log = logs / "newcomer" / "drift" / "0.log"
    assert log.exists(), "the log outlives the env, in the log dir"
    assert "solver: residual blew up (stderr)" in log.read_text()
    lines = text.splitlines()
    assert lines[0].startswith("newcomer/drift (process 0): ")
    assert "the simulation exited with status 3" in lines[0]
    assert "| solver: residual blew up (stdout)" in lines
    assert "| solver: residual blew up (stderr)" in lines
    # the message ends with a line of mtrl's: what the actor appends (its location) joins it
    assert lines[-1] == f"--- end of the simulation's output (whole log: {log}) ---"
    again = _spec("--fault crash --at 1").build(1)
    try:
        _crash(again)
    finally:
        again.close()
    assert (logs / "newcomer" / "drift" / "1.log").exists(), "a relaunch gets a log of its own"


def test_a_chatty_simulation_keeps_the_end_of_its_log_under_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_DIR_ENV, str(tmp_path))
    cap = 64 << 10
    with _spec("--spam 20000", log_max_bytes=cap).build(1) as env:
        env.reset()
    text = (tmp_path / "newcomer" / "drift" / "0.log").read_text()
    assert len(text) <= cap + 200
    assert "older output dropped" in text
    assert "spam line 00019999" in text, "the newest lines are kept"


def test_handshake_spaces_that_differ_from_the_registered_ones_are_refused() -> None:
    spec = _spec(obs=gym.spaces.Box(-1.0, 1.0, (3,), np.float32), name="mismatch")
    with pytest.raises(SpaceMismatchError) as caught:
        spec.build(2)
    text = str(caught.value)
    assert text.startswith("newcomer/mismatch: ")
    assert "observation float32[2] (handshake) but float32[3] (registered)" in text


def test_an_absurd_observation_is_refused_with_a_message_not_an_allocation_failure() -> None:
    with pytest.raises(SimulationError) as caught:
        ExternalSim(command=f"{PY_SIM} --obs-shape 100000,100000,1000")(4, 0)
    assert "observation" in str(caught.value)  # what is too large, not numpy's MemoryError
    spec = P.parse_spec(P.spec_json({"shape": [1000, 1000, 1000]}, {"shape": [1]}))
    with pytest.raises(SpaceMismatchError, match=r"shape \[1000, 1000, 1000\] float32 = 3\.7 GiB"):
        check_size("newcomer/drift", spec)  # a limit whatever the transport's message cap


@pytest.mark.parametrize(
    ("prog", "match"),
    [
        ("/nonexistent/solver", "command not found: '/nonexistent/solver' does not exist"),
        ("no-such-solver-xyz", "command not found: 'no-such-solver-xyz' is not on PATH"),
        ("{noexec}", "command not executable"),
    ],
)
def test_a_missing_or_non_executable_program_is_refused_before_launching(
    tmp_path: Path, prog: str, match: str
) -> None:
    noexec = tmp_path / "solver"
    noexec.write_text("#!/bin/sh\n")
    sim = ExternalSim(command=f"{prog} {{address}}", defaults={"noexec": str(noexec)})
    spec = EnvSpec(id="newcomer/prog", make=sim, plugin="newcomer")
    assert match in (spec.make.command_problem({}) or "")
    with pytest.raises(SimulationCommandError, match=f"newcomer/prog \\(process 0\\): {match}"):
        spec.make(1, 0)


@pytest.mark.parametrize(
    ("status", "meaning"), [(127, "command not found"), (126, "command not executable")]
)
def test_shell_statuses_127_and_126_are_named(status: int, meaning: str) -> None:
    sim = ExternalSim(command=f"{{python}} -c 'import sys; sys.exit({status})' {{address}}")
    with pytest.raises(SimulationCrashed, match=f"exited with status {status}: {meaning}"):
        sim(1, 0)


def test_steps_slower_than_half_the_timeout_are_said(capfd: pytest.CaptureFixture[str]) -> None:
    with _spec("--fault slow --at 2 --slow 1.5", step_timeout_s=2.5).build(1) as env:
        env.reset()
        for _ in range(3):
            env.step(np.zeros((1, 1), np.float32))
    err = capfd.readouterr().err
    assert "warning: newcomer/drift: 1 step(s) took over half the step timeout" in err
    assert "step_timeout_s=2.5" in err


def test_coupling_doc_counts_a_step_timeout_as_the_fault_kind_the_actors_record() -> None:
    doc = (ROOT / "docs" / "COUPLING.md").read_text()
    row = next(line for line in doc.splitlines() if "`SimulationTimeout`" in line)
    kind = row.strip().strip("|").split("|")[-1].strip()
    assert kind == f"`{fault_kind(SimulationTimeout('x'))}`"


def test_declared_spaces_are_not_learnt_by_launching_the_code(tmp_path: Path) -> None:
    """Neither the memory check nor the trainer's task setup starts a simulation whose
    plugin declared its spaces, env_kwargs or not."""
    from mtrl.train.preflight import check_memory
    from mtrl.train.task_envs import task_spaces

    mark = tmp_path / "launches"
    spec = _spec("--mark {mark}", defaults={"mark": str(mark)})
    cfg = ExperimentConfig.model_validate(
        {"tasks": [{"env": "newcomer/drift", "env_kwargs": {"mark": str(mark)}}]}
    )
    check_memory(cfg, [spec])
    assert task_spaces(spec, cfg, 0, None) == (OBS, ACT)
    assert not mark.exists(), "no simulation was launched"


def test_the_coupling_docs_gcc_line_builds_a_code(tmp_path: Path) -> None:
    """The hand-build commands of docs/COUPLING.md, section 7, as written, on the drift code."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    doc = (ROOT / "docs" / "COUPLING.md").read_text()
    block = re.search(r"By hand\b.*?```sh\n(.*?)```", doc, re.S)
    assert block, "section 7 has a shell block after 'By hand'"
    shutil.copy(HERE / "drift_sim.c", tmp_path / "my_sim.c")
    env = {"PATH": f"{Path(__import__('sys').executable).parent}:/usr/bin:/bin"}
    res = subprocess.run(
        ["bash", "-euc", block.group(1)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "my_sim").exists()


def test_the_readme_points_to_the_coupling_guide_and_lists_the_heat_example() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "[docs/COUPLING.md](docs/COUPLING.md)" in readme
    assert "`configs/heat.yaml`" in readme
    plugins = readme[readme.index("## Plugins") : readme.index("## Layout")]
    assert "| `heat` |" in plugins and "plugins_contrib/mtrl-heat" in plugins
