"""What ``mtrl tune`` leaves a user with: a replay-based rule's members keep their replay
across PBT's restarts (``checkpoint.replay`` turned on, said once), each member's run
directory has a name of its own, and an interrupted population shows mtrl's resume command
alone, not Ray Tune's ``Tuner.restore(...)`` (real ``mtrl tune`` runs in a private network
namespace, as tests/tune/test_tune.py's)."""

from __future__ import annotations

import csv
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mtrl.config import ExperimentConfig, parse_config
from mtrl.plugins import get_plugins
from mtrl.testing.netns import in_private_network
from mtrl.tune.history import read_population
from mtrl.tune.member import member_run_name
from mtrl.tune.ray_hint import RAY_TUNE_LOGGER, without_restore_hint
from mtrl.tune.replay import keep_replay

pytest.importorskip("ray.tune", reason="mtrl tune needs Ray Tune (pip install 'mtrl[tune]')")

SAC = """
name: pbt-sac
total_env_steps: 1000
tasks: [{{env: gymnasium/Pendulum-v1, num_envs: 2}}]
actors: {{mode: serial}}
learner:
  algorithm: sac
  unroll_length: 8
  batch_size: 2
  model: {{encoder_dim: 16, torso: [16]}}
  sac: {{learning_starts: 100, batch_size: 32, replay_ratio: 1}}
{checkpoint}tracking: {{run_dir: {runs}, wandb: {{mode: disabled}}, final_eval_episodes: 0}}
tune:
  population: 2
  interval_env_steps: 500
  quantile: 0.5
  metric: return
  search:
    learner.sac.actor_lr: {{log_uniform: [1.0e-4, 1.0e-3]}}
"""

IMPALA = """
name: pbt-stop
total_env_steps: 20000
tasks: [{{env: gymnasium/CartPole-v1, num_envs: 8}}]
actors: {{mode: serial}}
learner: {{model: {{encoder_dim: 32, torso: [32]}}, batch_size: 8}}
tracking: {{run_dir: {runs}, wandb: {{mode: disabled}}, final_eval_episodes: 0}}
tune:
  population: 2
  interval_env_steps: 2000
  quantile: 0.5
  metric: return
  search:
    learner.learning_rate: {{log_uniform: [1.0e-4, 3.0e-3]}}
"""


def _sac(tmp_path: Path, checkpoint: str = "") -> str:
    return SAC.format(checkpoint=checkpoint, runs=tmp_path / "runs")


def _keep(text: str) -> tuple[ExperimentConfig, tuple[ExperimentConfig, str | None]]:
    """The config of ``text`` (parsed with the installed rules' settings, as ``mtrl tune``
    does) and what :func:`keep_replay` makes of it, asking the rule's registration whether it
    keeps a replay."""
    plugins = get_plugins()
    cfg = parse_config(text, **plugins.config_context())
    return cfg, keep_replay(cfg, plugins.algorithms.get(cfg.learner.algorithm).has_replay)


def test_a_replay_rules_population_keeps_its_replay_unless_the_config_says_otherwise(
    tmp_path: Path,
) -> None:
    cfg, (kept, note) = _keep(_sac(tmp_path))
    assert kept.checkpoint.replay and kept.learner.checkpoint_replay
    assert note is not None and "checkpoint.replay: true" in note and "sac" in note
    assert not cfg.checkpoint.replay, "the config given is left as it was"
    explicit, kept_explicit = _keep(_sac(tmp_path, "checkpoint: {replay: false}\n"))
    assert kept_explicit == (explicit, None)
    on, kept_on = _keep(_sac(tmp_path, "checkpoint: {replay: true}\n"))
    assert kept_on == (on, None)
    impala, kept_impala = _keep(IMPALA.format(runs=tmp_path / "runs"))
    assert kept_impala == (impala, None)


def test_members_run_directories_are_named_apart() -> None:
    assert member_run_name("pbt", 0) != member_run_name("pbt", 1)
    assert member_run_name("pbt", 3) == "pbt-member3"


def test_ray_tunes_restore_hint_is_dropped_and_its_other_lines_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger(RAY_TUNE_LOGGER)
    with caplog.at_level(logging.INFO, logger=RAY_TUNE_LOGGER), without_restore_hint():
        logger.warning(
            "Experiment has been interrupted, but the most recent state was saved.\n"
            'Resume experiment with: Tuner.restore(path="/x", trainable=...)'
        )
        logger.info("Total run time: 3.00 seconds")
    assert [r.getMessage() for r in caplog.records] == ["Total run time: 3.00 seconds"]


REPO = Path(__file__).resolve().parents[2]


def _tune_command(*args: str) -> tuple[list[str], dict[str, str]]:
    """``mtrl tune ARGS`` in a private network namespace, importing this checkout's mtrl
    (the command runs in a test's folder, where the installed one would win)."""
    cmd = in_private_network([sys.executable, "-m", "mtrl.cli", "tune", *args])
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    return cmd, {**env, "RAY_USAGE_STATS_ENABLED": "0", "WANDB_MODE": "disabled"}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_sac_population_keeps_its_replay_through_the_meeting_and_names_its_runs_apart(
    tmp_path: Path,
) -> None:
    """Two SAC members of two intervals: at the meeting both restart from checkpoints (one
    from the other's, after an exploit) and find their replay there instead of refilling it;
    the population says once that it turned checkpoint.replay on; the two run directories
    are named by member, so a report's legend tells them apart."""
    config = tmp_path / "sac.yaml"
    config.write_text(_sac(tmp_path))
    cmd, env = _tune_command(str(config), "--dir", str(tmp_path / "tune"))
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert "replay not in the checkpoint" not in out, out[-4000:]
    assert out.count("note: checkpoint.replay: true for this population") == 1, out[-4000:]
    exp = tmp_path / "tune" / "pbt-sac"
    members = read_population(exp)
    assert len(members) == 2 and all(len(m.intervals) == 2 for m in members), members
    assert all(m.intervals[1].started for m in members), "restarted at the meeting"
    names = sorted(m.run_dir.name.split("__")[0] for m in members)
    assert names == ["pbt-sac-member0", "pbt-sac-member1"], names
    rows = list(csv.DictReader((exp / "members.csv").open()))
    assert sorted(Path(r["run_dir"]).name for r in rows) == sorted(m.run_dir.name for m in members)
    for m in members:  # what a restarted member loads holds every task's replay
        (newest,) = sorted(m.run_dir.glob("checkpoints/*.pt"))[-1:]
        state = torch.load(newest, weights_only=False)
        assert "replay" in state["learner"], sorted(state["learner"])


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_an_interrupted_population_shows_mtrls_resume_command_and_not_ray_tunes(
    tmp_path: Path,
) -> None:
    config = tmp_path / "stop.yaml"
    config.write_text(IMPALA.format(runs=tmp_path / "runs"))
    exp = tmp_path / "tune" / "pbt-stop"
    cmd, env = _tune_command(str(config), "--dir", str(tmp_path / "tune"))
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path, env=env
    )
    try:
        while not (exp.exists() and _both_reported(exp)):
            assert proc.poll() is None, proc.communicate()[0][-4000:]
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out[-4000:]
    assert f"continue with: mtrl tune {config} --dir {tmp_path / 'tune'} --resume" in out
    assert "Tuner.restore" not in out, out[-4000:]


def _both_reported(exp: Path) -> bool:
    members = read_population(exp)
    return len(members) == 2 and all(m.intervals for m in members)
