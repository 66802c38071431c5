"""``mtrl validate`` and ``mtrl train`` on external envs of a plugin installed the way a third
party's is (an entry point on PYTHONPATH): missing programs and spaces that disagree with the
registration are refused up front (exit 2); a run starts its code only to train and to
evaluate, and keeps the code's logs in its run directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.external.conftest import HERE, install_plugin
from tests.plugins.test_entry_points import _mtrl as run_mtrl

PLUGIN = f"""
import gymnasium as gym
import numpy as np

from mtrl.plugins import hookimpl
from mtrl.plugins.external import ExternalSim

DRIFT = "{{python}} {HERE / "drift_sim.py"} {{address}} --mark {{mark}}"
OBS = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
ACT = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


@hookimpl
def mtrl_register_envs(register):
    sim = ExternalSim(command=DRIFT, defaults={{"mark": ""}})
    register.env("drift", sim, observation_space=OBS, action_space=ACT)
    wrong = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    register.env("mismatch", sim, observation_space=wrong, action_space=ACT)
    prog = ExternalSim(command="{{prog}} {{address}}", defaults={{"prog": "/nonexistent/solver"}})
    register.env("prog", prog, observation_space=OBS, action_space=ACT)
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the ``newcomer`` plugin and the metadata that registers its entry point."""
    return install_plugin(tmp_path_factory.mktemp("site"), "newcomer", PLUGIN)


def _mtrl(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_mtrl(*args, site=site, MTRL_PLUGINS="newcomer")


def _config(path: Path, env: str, kwargs: str, extra: str = "") -> Path:
    path.write_text(
        f"name: newcomer\ntotal_env_steps: 1280\ntasks:\n  - env: {env}\n    num_envs: 4\n"
        f"    env_kwargs: {kwargs}\n"
        "learner: {batch_size: 4, unroll_length: 16}\n"
        f"tracking: {{run_dir: {path.parent / 'runs'}, console: quiet, csv: false, "
        f"wandb: {{mode: disabled}}, final_eval_episodes: 1}}\n{extra}"
    )
    return path


def test_validate_check_envs_refuses_spaces_that_differ_from_the_registration(
    site: Path, tmp_path: Path
) -> None:
    cfg = _config(tmp_path / "c.yaml", "newcomer/mismatch", "{}")
    assert _mtrl(site, "validate", str(cfg)).returncode == 0  # starts no code
    res = _mtrl(site, "validate", "--check-envs", str(cfg))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "newcomer/mismatch: the simulation's spaces differ" in res.stderr
    assert "observation float32[2] (handshake) but float32[3] (registered)" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("command", ["validate", "train"])
def test_a_missing_program_is_refused_before_anything_starts(
    site: Path, tmp_path: Path, command: str
) -> None:
    cfg = _config(tmp_path / "c.yaml", "newcomer/prog", "{prog: /opt/solver/bin/solver}")
    res = _mtrl(site, command, str(cfg))
    assert res.returncode == 2, res.stdout + res.stderr
    assert (
        "tasks[0].env: newcomer/prog: command not found: '/opt/solver/bin/solver' does not exist"
    ) in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_train_starts_the_code_only_to_train_and_evaluate_and_keeps_its_logs(
    site: Path, tmp_path: Path
) -> None:
    """One process actor and the final evaluation: two starts (there were four: two more only
    to learn the spaces the plugin declared); each start's log in the run directory."""
    mark = tmp_path / "starts"
    extra = "actors: {mode: process}\nscheduler: {num_actors: 1}\n"
    cfg = _config(tmp_path / "c.yaml", "newcomer/drift", f"{{mark: {mark}}}", extra)
    res = _mtrl(site, "train", str(cfg))
    assert res.returncode == 0, res.stdout + res.stderr
    assert len(mark.read_text().split()) == 2, res.stdout
    (run_dir,) = (tmp_path / "runs").glob("newcomer__*")
    logs = sorted(p.name for p in (run_dir / "sim-logs" / "newcomer" / "drift").iterdir())
    assert logs == ["0.log", "1.log"]
    assert "drift_sim.py" in (run_dir / "sim-logs" / "newcomer" / "drift" / "0.log").read_text()
