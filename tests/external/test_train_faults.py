"""What ``mtrl train`` and ``mtrl validate --check-envs`` say when a real simulation process
fails: spaces that differ from the registration, a simulation that cannot start (a typo in the
module it imports, a code of another protocol version), a crash under serial actors, and an
env_kwargs key the simulation does not take. Each ends with exit 2, one line per problem and
no traceback; a crash under serial actors leaves a checkpoint and says how to resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.external.conftest import HERE, install_plugin
from tests.plugins.test_entry_points import _mtrl as run_mtrl

PLUGIN = f"""
import gymnasium as gym
import numpy as np

from mtrl.plugins import hookimpl
from mtrl.plugins.external import ExternalSim

DRIFT = "{{python}} {HERE / "drift_sim.py"} {{address}} --fault {{fault}} --at {{at}} --say {{say}}"
OBS = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
ACT = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


@hookimpl
def mtrl_register_envs(register):
    drift = ExternalSim(command=DRIFT, defaults={{"fault": "none", "at": 0, "say": "hello"}})
    register.env("drift", drift, observation_space=OBS, action_space=ACT)
    wrong = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    register.env("mismatch", drift, observation_space=wrong, action_space=ACT)
    each = ExternalSim(
        command=DRIFT + " --only {{only}}",
        defaults={{"fault": "none", "at": 0, "say": "hello", "only": "4:2"}},
        copies_per_process=1,
    )
    register.env("each", each, observation_space=OBS, action_space=ACT)
    typo = ExternalSim(command='{{python}} -c "import mtrl_sim_typo" {{address}}')
    register.env("typo", typo, observation_space=OBS, action_space=ACT)
    other = ExternalSim(command="{{python}} {HERE / "other_version_sim.py"} {{address}}")
    register.env("other_version", other)  # no spaces declared: train asks the code for them
    register.env("typo_undeclared", typo)
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the ``faulty`` plugin and the metadata that registers its entry point."""
    return install_plugin(tmp_path_factory.mktemp("site"), "faulty", PLUGIN)


def _mtrl(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_mtrl(*args, site=site, MTRL_PLUGINS="faulty", **env)


def _config(path: Path, tasks: str, mode: str = "serial", steps: int = 1280) -> Path:
    path.write_text(
        f"name: faulty\ntotal_env_steps: {steps}\ntasks:\n{tasks}"
        f"actors: {{mode: {mode}}}\nscheduler: {{num_actors: 1}}\n"
        "learner: {batch_size: 4, unroll_length: 16}\n"
        f"tracking: {{run_dir: {path.parent / 'runs'}, console: quiet, csv: false, "
        "wandb: {mode: disabled}, final_eval_episodes: 1}\n"
    )
    return path


def _task(env: str, kwargs: str = "{}", name: str = "") -> str:
    named = f"    name: {name}\n" if name else ""
    return f"  - env: {env}\n{named}    num_envs: 4\n    env_kwargs: {kwargs}\n"


def _errors(res: subprocess.CompletedProcess[str]) -> list[str]:
    """The ``error:`` lines of a command's stderr, after checking it failed as a user's
    mistake (exit 2) and printed no traceback."""
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    return [line for line in res.stderr.splitlines() if line.startswith("error: ")]


def test_train_refuses_spaces_that_differ_from_the_registration_in_one_line(
    site: Path, tmp_path: Path
) -> None:
    """Was: ``AttributeError: 'SpaceMismatchError' object has no attribute 'problems'``."""
    res = _mtrl(site, "train", str(_config(tmp_path / "c.yaml", _task("faulty/mismatch"))))
    (line,) = _errors(res)
    assert line.startswith("error: tasks[0].env: faulty/mismatch: the simulation's spaces differ")
    assert "observation float32[2] (handshake) but float32[3] (registered)" in line
    assert res.stderr.strip() == line


@pytest.mark.parametrize("command", ["train", "validate"])
def test_a_simulation_that_cannot_start_is_said_with_its_own_last_line(
    site: Path, tmp_path: Path, command: str
) -> None:
    """One line: the simulation's ``ModuleNotFoundError`` and its whole log, which exists
    (train's run directory goes, but its simulation logs are kept elsewhere)."""
    cfg = _config(tmp_path / "c.yaml", _task("faulty/typo"))
    args = ["validate", "--check-envs"] if command == "validate" else ["train"]
    res = _mtrl(site, *args, str(cfg), TMPDIR=str(tmp_path))  # where kept logs go
    if command == "validate":
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        (line,) = res.stderr.strip().splitlines()
    else:
        (line,) = _errors(res)
        assert res.stderr.strip() == line
        assert line.startswith("error: tasks[0] (faulty/typo): the simulation could not start")
        assert not (tmp_path / "runs").exists()  # nothing half-made is left
    assert "exited with status 1" in line
    assert "its last output line: ModuleNotFoundError: No module named 'mtrl_sim_typo'" in line
    log = Path(re.search(r"\(whole log: (\S+)\)$", line).group(1))
    assert tmp_path in log.parents
    assert "No module named 'mtrl_sim_typo'" in log.read_text()


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ("other_version", "peer speaks coupling protocol version 2, this side 1"),
        ("typo_undeclared", "its last output line: ModuleNotFoundError: No module named"),
    ],
)
def test_train_refuses_a_code_that_fails_when_asked_for_its_spaces_in_one_line(
    site: Path, tmp_path: Path, env: str, said: str
) -> None:
    """Spaces not declared, so train starts the code to ask for them before the run starts.
    Was: the handshake's error as a traceback, exit 1. The code's own last output line is
    said though its log went with the env (no run directory yet)."""
    res = _mtrl(site, "train", str(_config(tmp_path / "c.yaml", _task(f"faulty/{env}"))))
    (line,) = _errors(res)
    assert res.stderr.strip() == line
    assert line.startswith(f"error: tasks[0] (faulty/{env}): the simulation could not start")
    assert said in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", ["train", "validate"])
def test_an_env_kwargs_key_the_simulation_does_not_take_is_refused_with_the_closest(
    site: Path, tmp_path: Path, command: str
) -> None:
    """Refused before any code starts, by ``mtrl validate`` too (it passed there; train named
    the keys the trainer adds, not the user's), with the key meant."""
    cfg = _config(tmp_path / "c.yaml", _task("faulty/drift", "{fualt: crash}"))
    res = _mtrl(site, command, str(cfg))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.endswith(
        "tasks[0].env_kwargs: faulty/drift: unexpected env_kwargs ['fualt'] (did you mean "
        "'fault'?); this simulation takes ['at', 'fault', 'say']"
    )
    assert not (tmp_path / "runs").exists()


def test_a_crash_under_serial_actors_ends_with_a_checkpoint_and_the_resume_command(
    site: Path, tmp_path: Path
) -> None:
    """The simulation exits at its 40th step (the third unroll): one line naming the task and
    the crash, a checkpoint of the two updates done, and the command that resumes the run."""
    kwargs = "{fault: crash, at: 40, say: solver-started}"
    cfg = _config(tmp_path / "c.yaml", _task("faulty/drift", kwargs, name="rod"), steps=100_000)
    res = _mtrl(site, "train", str(cfg))
    crash, resume = _errors(res)
    assert crash.startswith("error: task 'rod': its env failed under serial actors")
    assert "the simulation exited with status 3" in crash
    assert "its last output line: solver-started (stderr)" in crash
    (run_dir,) = (tmp_path / "runs").glob("faulty__*")
    assert f"continue with: mtrl train --resume {run_dir}" in resume
    assert list((run_dir / "checkpoints").iterdir()), "no checkpoint written"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["serial", "process"])
def test_tasks_of_one_env_keep_their_simulation_logs_apart(
    site: Path, tmp_path: Path, mode: str
) -> None:
    """Two tasks of one env: each task's launches log into a folder of its own, named after
    the task (they shared ``sim-logs/<env id>/``, numbered in one sequence)."""
    tasks = _task("faulty/drift", "{say: from-a}", name="a")
    tasks += _task("faulty/drift", "{say: from-b}", name="b")
    cfg = _config(tmp_path / "c.yaml", tasks, mode=mode, steps=640)
    cfg.write_text(cfg.read_text().replace("num_actors: 1", "num_actors: 2"))
    res = _mtrl(site, "train", str(cfg))
    assert res.returncode == 0, res.stdout + res.stderr
    (run_dir,) = (tmp_path / "runs").glob("faulty__*")
    logs = run_dir / "sim-logs"
    assert sorted(p.name for p in logs.iterdir()) == ["a", "b"]
    for name in ("a", "b"):
        texts = [p.read_text() for p in sorted((logs / name).glob("*.log"))]
        assert texts and all(f"from-{name} (stderr)" in text for text in texts), texts


@pytest.mark.slow
def test_under_process_actors_a_simulation_that_cannot_start_ends_in_one_line(
    site: Path, tmp_path: Path
) -> None:
    """Process actors restart the code until the task is quarantined; the run then ends with
    one line: the simulation's own last line and its whole log, which the run directory
    keeps (the log tails the actors' reports quote are left to the console)."""
    cfg = _config(tmp_path / "c.yaml", _task("faulty/typo"), mode="process")
    cfg.write_text(cfg.read_text().replace("num_actors: 1}", "num_actors: 1, max_restarts: 1}"))
    res = _mtrl(site, "train", str(cfg))
    (line,) = _errors(res)
    assert res.stderr.strip() == line
    assert "every task is quarantined" in line and "task 'faulty/typo' quarantined" in line
    assert "its last output line: ModuleNotFoundError: No module named 'mtrl_sim_typo'" in line
    log = Path(re.search(r"\(whole log: (\S+)\)$", line).group(1))
    assert "No module named 'mtrl_sim_typo'" in log.read_text()


def test_train_quarantines_a_member_that_always_crashes_alone_and_goes_on(
    site: Path, tmp_path: Path
) -> None:
    """One simulation process per copy; the one serving copy 2 crashes at its first step,
    launch after launch: it is quarantined alone (one line says so) and the run goes on,
    stopped by SIGTERM once the quarantine is seen (the restarts are asynchronous, so no step
    budget says when it happens) with a checkpoint."""
    kwargs = "{fault: crash, at: 1, only: '4:2'}"
    cfg = _config(tmp_path / "c.yaml", _task("faulty/each", kwargs), steps=10_000_000)
    text = cfg.read_text().replace("{num_actors: 1}", "{num_actors: 1, member_max_restarts: 1}")
    cfg.write_text(text)
    log = tmp_path / "train.log"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MTRL_")}
    environ.update(PYTHONPATH=str(site), MTRL_PLUGINS="faulty")
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mtrl.cli", "train", str(cfg)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environ,
        )
        try:
            deadline = time.monotonic() + 300
            while "quarantined after" not in log.read_text() and proc.poll() is None:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=120)
        finally:
            proc.kill()
    out = log.read_text()
    assert code == 128 + signal.SIGTERM, out
    assert "checkpoint written; continue with: mtrl train --resume" in out, out
    assert out.count("restarted alone") == 1, out
    (line,) = [ln for ln in out.splitlines() if "quarantined after" in ln]
    assert line.startswith("WARNING: member 2 (copy 2) of actor 0 of task 'faulty/each'"), line
    (metrics,) = (tmp_path / "runs").rglob("metrics.jsonl")
    last = [json.loads(row) for row in metrics.read_text().splitlines()][-1]
    assert last["task/faulty/each/member_faults"] == 2
    assert last["task/faulty/each/member_faults/exit"] == 2
    assert last["task/faulty/each/members_quarantined"] == 1
    assert last["task/faulty/each/member/0.2/faults"] == 2
    assert last["task/faulty/each/faults"] == 0, "the actor itself never failed"


def test_validate_refuses_a_bad_member_setting_in_one_line(site: Path, tmp_path: Path) -> None:
    cfg = _config(tmp_path / "c.yaml", _task("faulty/each"))
    cfg.write_text(cfg.read_text().replace("{num_actors: 1}", "{member_max_restarts: -1}"))
    for command in ("validate", "train"):
        res = _mtrl(site, command, str(cfg))
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        (line,) = [ln for ln in res.stderr.splitlines() if "member_max_restarts" in ln]
        assert "scheduler.member_max_restarts: Input should be greater than" in line, line
