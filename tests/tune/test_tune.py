"""``mtrl tune``: the search space handed to Ray Tune, an exploit's checkpoint round trip
between members, the scheduler's meeting points, and a population of two trained end to end,
interrupted and resumed (real Ray, in a private network namespace)."""

from __future__ import annotations

import csv
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from mtrl.config import parse_config
from mtrl.errors import ConfigError, UserError
from mtrl.testing.netns import in_private_network
from mtrl.train.progress import TaskResult
from mtrl.train.trainer import Trainer
from mtrl.tune.history import read_population
from mtrl.tune.member import MemberTrainer, member_score, train_interval
from mtrl.tune.space import apply, bounds, mutations, param_space

pytest.importorskip("ray.tune", reason="mtrl tune needs Ray Tune (pip install 'mtrl[tune]')")

TINY = """
name: pbt-tiny
total_env_steps: {total}
tasks: [{{env: gymnasium/CartPole-v1, num_envs: 8}}]
actors: {{mode: serial}}
learner: {{model: {{encoder_dim: 32, torso: [32]}}, batch_size: 8}}
tracking: {{run_dir: {runs}, wandb: {{mode: disabled}}, final_eval_episodes: 2}}
tune:
  population: 2
  interval_env_steps: 2000
  quantile: 0.5
  metric: return
  search:
    learner.learning_rate: {{log_uniform: [1.0e-4, 3.0e-3]}}
    learner.entropy_coef: {{choice: [0.001, 0.02]}}
    tasks.0.num_envs: {{choice: [4, 8]}}
"""


def _cfg(tmp_path: Path, total: int = 6000):
    return parse_config(TINY.format(total=total, runs=tmp_path / "runs"), "tiny.yaml")


def test_the_search_space_becomes_ray_tunes_and_a_members_values_its_config(tmp_path) -> None:
    from ray.tune.search.sample import Categorical, Float

    cfg = _cfg(tmp_path)
    space = param_space(cfg.tune)
    assert isinstance(space["learner.learning_rate"], Float)
    assert isinstance(space["tasks.0.num_envs"], Categorical)
    assert mutations(cfg.tune)["learner.entropy_coef"] == [0.001, 0.02]
    member = apply(cfg, {"learner.learning_rate": 2e-3, "tasks.0.num_envs": 4.8})
    assert member.learner.learning_rate == 2e-3
    assert member.tasks[0].num_envs == 5  # a whole-number field gets its value rounded
    with pytest.raises(ValueError):
        apply(cfg, {"learner.learning_rate": -1.0})
    pb2 = parse_config(
        "tasks: [{env: gymnasium/CartPole-v1}]\n"
        "tune: {algorithm: pb2, search: {learner.gamma: {uniform: [0.9, 0.999]}}}\n"
    )
    assert bounds(pb2.tune) == {"learner.gamma": [0.9, 0.999]}


def test_the_next_meeting_lies_past_every_member() -> None:
    """Ray's planned point while no member has reached it; else one step past the furthest
    (without it, a restored or overshooting population waits at its meeting point forever)."""
    from mtrl.tune.schedulers import next_meeting  # imports Ray Tune

    assert next_meeting(4000, [2080, 2070]) == 4000
    assert next_meeting(4160, [4160, 4100]) == 4161
    assert next_meeting(4000, [4160, 4100]) == 4161
    assert next_meeting(2000, []) == 2000


def _result(name: str, score: float | None, ret: float | None, episodes: int = 5) -> TaskResult:
    return TaskResult(name, 100, episodes, ret, score, None)


def test_the_score_ranks_by_normalised_score_or_return() -> None:
    both = [_result("a", 0.5, 10.0), _result("b", 1.0, 30.0)]
    assert member_score(both, "normalized_score") == 0.75
    assert member_score(both, "return") == 20.0
    assert member_score([_result("a", None, None, 0)], "return") == float("-inf")
    with pytest.raises(UserError, match="have no normalised score"):
        member_score([_result("a", None, 10.0)], "normalized_score")


def test_the_target_metric_counts_each_task_by_its_way_to_its_own_target() -> None:
    """A 1000-point task and a 5-point one weigh alike: each is measured from its random
    score (0 where the env registers none) to its target."""
    pole = TaskResult("pole", 100, 5, 760.0, None, 950.0)  # random 0: 0.8 of the way
    brk = TaskResult("breakout", 100, 5, 2.75, None, 5.0)  # random 0.5: half the way
    assert member_score([pole, brk], "target", [None, 0.5]) == pytest.approx(0.65)
    assert member_score([pole, brk], "return") == pytest.approx(381.375)  # pole alone decides
    unseen = TaskResult("breakout", 0, 0, None, None, 5.0)
    assert member_score([pole, unseen], "target", [None, 0.5]) == float("-inf")


def test_the_target_metric_needs_a_target_on_every_task() -> None:
    text = """
tasks:
  - {env: gymnasium/CartPole-v1, target_score: 475}
  - {env: gymnasium/Pendulum-v1}
tune:
  metric: target
  search: {learner.learning_rate: {log_uniform: [1.0e-4, 1.0e-3]}}
"""
    with pytest.raises(ConfigError, match=r"needs a target_score on every task; tasks\[1\]"):
        parse_config(text)


def test_an_exploit_copies_the_whole_state_and_keeps_the_members_hyperparameters(
    tmp_path: Path,
) -> None:
    """Member B takes member A's checkpoint with its own explored values: B's learner then
    holds A's weights, optimiser state, PopArt statistics and version exactly, its progress
    counters are A's, and it trains on with B's step size and entropy weight."""
    base = _cfg(tmp_path, total=20000)
    a = apply(base, {"learner.learning_rate": 1e-3, "learner.entropy_coef": 0.001})
    b = apply(base, {"learner.learning_rate": 2.5e-3, "learner.entropy_coef": 0.02})
    a_dir = tmp_path / "a"
    a_dir.mkdir()
    state, path, _ = train_interval(a, a_dir, None, 2000, member=0)
    assert path.exists() and int(state["env_steps"]) >= 2000
    b_dir = tmp_path / "b"
    b_dir.mkdir()
    trainer = Trainer(b, console=False, run_dir=b_dir)
    try:
        trainer.load_state_dict(state)
        got = trainer.learner.state_dict()
        for name, want in state["learner"]["model"].items():
            assert torch.equal(got["model"][name], want), name
        for key in ("mu", "nu", "version"):
            assert torch.equal(torch.as_tensor(got[key]), torch.as_tensor(state["learner"][key]))
        want_opt = state["learner"]["optimizer"]["state"]
        for idx, slots in want_opt.items():
            for slot, value in slots.items():
                assert torch.equal(got["optimizer"]["state"][idx][slot], value), (idx, slot)
        assert trainer.env_steps == state["env_steps"]
        trainer.learner.set_progress(0.0)
        assert trainer.learner.optimizer.param_groups[0]["lr"] == pytest.approx(2.5e-3)
        assert trainer.learner.cfg.entropy_coef == 0.02
    finally:
        trainer.close()
    # And through train_interval, as a member restarted by PBT does: it continues A's steps.
    state_b, _, _ = train_interval(b, b_dir, state, int(state["env_steps"]) + 1000, member=1)
    assert int(state_b["env_steps"]) >= int(state["env_steps"]) + 1000
    assert state_b["learner"]["version"] > state["learner"]["version"]


def test_a_member_trains_interval_after_interval_on_one_trainer(tmp_path: Path) -> None:
    """Between two intervals a member keeps its trainer and actors: env steps, updates and the
    clock go on from where the last interval ended, each interval leaves a checkpoint, and the
    greedy evaluation runs once, at the end of the budget."""
    cfg = apply(_cfg(tmp_path, total=6000), {"learner.learning_rate": 1e-3})
    run_dir = tmp_path / "member"
    run_dir.mkdir()
    member = MemberTrainer(cfg, run_dir, None)
    try:
        states, paths = [], []
        for stop_at in (2000, 4000, 6000):
            state, path, score = member.advance(stop_at)
            states.append(state)
            paths.append(path)
            if stop_at == 2000:
                trainer, pool = member.trainer, member.trainer.pool
            assert member.trainer is trainer and member.trainer.pool is pool, "rebuilt"
            assert np.isfinite(score)
            assert int(state["env_steps"]) >= stop_at
    finally:
        member.close()
    assert member.trainer is None
    for earlier, later in itertools.pairwise(states):
        assert int(later["env_steps"]) > int(earlier["env_steps"])
        assert later["updates"] > earlier["updates"]
        assert later["elapsed_s"] > earlier["elapsed_s"]
    assert len(set(paths)) == 3 and all(p.exists() for p in paths)
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").open()]
    evals = [r for r in records if "eval/gymnasium/CartPole-v1/greedy_return" in r]
    assert len(evals) == 1 and evals[0]["charts/env_steps"] >= 6000
    elapsed = [r["charts/elapsed_s"] for r in records]
    assert elapsed == sorted(elapsed), "the clock restarted at an interval"


def test_an_asynchronous_population_uses_rays_own_schedulers(tmp_path: Path) -> None:
    from ray.tune.schedulers import PopulationBasedTraining
    from ray.tune.schedulers.pb2 import PB2

    from mtrl.tune.schedulers import SynchPB2, SynchPBT, make_scheduler

    cfg = _cfg(tmp_path)
    assert isinstance(make_scheduler(cfg), SynchPBT)
    tune = cfg.tune.model_copy(update={"synchronous": False})
    scheduler = make_scheduler(cfg.model_copy(update={"tune": tune}))
    assert type(scheduler) is PopulationBasedTraining and not scheduler._synch
    pb2 = cfg.tune.model_copy(
        update={
            "synchronous": False,
            "algorithm": "pb2",
            "search": {"learner.learning_rate": cfg.tune.search["learner.learning_rate"]},
        }
    )
    assert type(make_scheduler(cfg.model_copy(update={"tune": pb2}))) is PB2
    sync_pb2 = pb2.model_copy(update={"synchronous": True})
    assert isinstance(make_scheduler(cfg.model_copy(update={"tune": sync_pb2})), SynchPB2)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_an_asynchronous_population_restarts_only_the_members_that_copy(tmp_path: Path) -> None:
    """``tune.synchronous: false``: members are not paused to meet, so a member that does not
    copy another trains on with its trainer and actors; only a copy restarts one."""
    config = tmp_path / "tiny.yaml"
    total = 8000
    text = TINY.format(total=total, runs=tmp_path / "runs")
    config.write_text(text.replace("  population: 2\n", "  population: 2\n  synchronous: false\n"))
    assert "synchronous: false" in config.read_text()
    res = _tune(str(config), "--dir", str(tmp_path / "tune"), cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    members = read_population(tmp_path / "tune" / "pbt-tiny")
    assert len(members) == 2
    intervals = [i for m in members for i in m.intervals]
    for m in members:
        assert m.intervals[0].started and m.intervals[-1].env_steps >= total
        for i in m.intervals:
            # a copy always comes with a start (Ray Tune restarts the member from the copy)
            assert i.started or i.copied_from is None
    # At an inner interval's end a member that ranks above the other's latest score trains on
    # (usually at half of the six; at least once, whatever the machine's load: a member's
    # first end comes before the other has a score). A synchronous population of two restarts
    # at every interval.
    trained_on = [(i.started, i.copied_from) for i in intervals]
    assert sum(not i.started for i in intervals) >= 1, trained_on


def _tune_command(*args: str) -> tuple[list[str], dict[str, str]]:
    cmd = in_private_network([sys.executable, "-m", "mtrl.cli", "tune", *args])
    return cmd, {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "WANDB_MODE": "disabled"}


def _tune(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd, env = _tune_command(*args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=cwd, env=env)


def _tune_process(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """``mtrl tune`` started, its stderr into its stdout (the private network namespace's
    ``unshare`` and shell exec into Python, so the process is Python's, and signals reach it)."""
    cmd, env = _tune_command(*args)
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd, env=env
    )


def _members(exp: Path) -> list[Path]:
    return sorted(p for p in exp.glob("train_member_*") if p.is_dir())


def _intervals_done(exp: Path) -> int:
    """The fewest intervals any of the two members has recorded (0 before both started)."""
    members = read_population(exp)
    return min((len(m.intervals) for m in members), default=0) if len(members) == 2 else 0


def _steps_logged(trial: Path) -> list[int]:
    """The env steps of each metrics record of a member's run, in the order written."""
    (run,) = (trial / "run").iterdir()  # continued, never a second run directory
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [int(json.loads(line)["charts/env_steps"]) for line in lines]


@pytest.mark.slow
@pytest.mark.timeout(1000)
def test_a_population_of_two_trains_exploits_explores_and_resumes_after_ctrl_c(
    tmp_path: Path,
) -> None:
    """Interrupted (SIGINT, as Ctrl-C sends) after both members' second interval, ``mtrl
    tune`` says how to continue and exits 130; ``--resume`` continues each member from its
    checkpoint (its env steps never go back) to the end, past the meeting points Ray Tune's
    synchronous PBT would otherwise wait at forever after a restore."""
    config = tmp_path / "tiny.yaml"
    total = 8000
    config.write_text(TINY.format(total=total, runs=tmp_path / "runs"))
    exp = tmp_path / "tune" / "pbt-tiny"
    proc = _tune_process(str(config), "--dir", str(tmp_path / "tune"), cwd=tmp_path)
    try:
        while not (exp.exists() and _intervals_done(exp) >= 2):
            assert proc.poll() is None, proc.communicate()[0][-4000:]
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out[-4000:]
    assert f"continue with: mtrl tune {config} --dir {tmp_path / 'tune'} --resume" in out
    before = {t.name: max(_steps_logged(t)) for t in _members(exp)}
    assert min(before.values()) >= 4000 and max(before.values()) < total, before
    again = _tune(str(config), "--dir", str(tmp_path / "tune"), cwd=tmp_path)
    assert again.returncode == 2 and "exists: continue it with --resume" in again.stderr

    res = _tune(str(config), "--dir", str(tmp_path / "tune"), "--resume", cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = list(csv.DictReader((exp / "members.csv").open()))
    assert len(rows) == 2
    for row in rows:
        assert int(row["env_steps"]) >= total
        assert float(row["score"]) > 0
        run_dir = Path(row["run_dir"])
        assert run_dir.is_relative_to(exp), "each member's run lives in the experiment"
        assert (run_dir / "metrics.jsonl").exists() and list(run_dir.glob("checkpoints/*.pt"))
    for trial in _members(exp):
        steps = _steps_logged(trial)
        assert steps == sorted(steps) and steps[-1] >= total, (trial.name, steps)
    # Synchronous PBT with quantile 0.5 and two members: at the inner interval ends the worse
    # member copies the better one and perturbs what it searches (at each of the three, when
    # their scores differ).
    exploits = [json.loads(line) for line in (exp / "pbt_global.txt").read_text().splitlines()]
    assert 1 <= len(exploits) <= 3, exploits
    for _, _, _, _, old, new in exploits:
        assert set(new) == {"learner.learning_rate", "learner.entropy_coef", "tasks.0.num_envs"}
        assert new["learner.learning_rate"] != old["learner.learning_rate"]  # explored
    # Each member's intervals, as the members recorded them: every exploit, those before the
    # interrupt included (Ray Tune's pbt_global.txt holds only those since the resume).
    members = read_population(exp)
    copies = [(m.trial, i) for m in members for i in m.intervals if i.copied_from is not None]
    assert len(copies) >= len(exploits)
    assert all(i.copied_from in {t.name for t in _members(exp)} - {t} for t, i in copies)
    for m in members:
        steps = [i.env_steps for i in m.intervals]
        assert steps == sorted(steps) and steps[-1] >= total
    report = subprocess.run(
        [sys.executable, "-m", "mtrl.cli", "report", str(exp)], capture_output=True, text=True
    )
    assert report.returncode == 0, report.stderr
    assert "member 0: score" in report.stdout and "member 1: score" in report.stdout
    assert "copied member" in report.stdout
    assert (exp / "plots" / "population.png").exists()
    assert (exp / "plots" / "return_vs_steps.png").exists()


def test_a_config_without_a_tune_section_or_a_resume_that_changes_the_population_is_refused(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("tasks: [{env: gymnasium/CartPole-v1}]\n")
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(TINY.format(total=6000, runs=tmp_path / "runs"))
    for args, says in (
        ([str(plain)], "no tune: section"),
        ([str(tiny), "--resume", "--total-env-steps", "9000"], "--total-env-steps cannot change"),
    ):
        res = subprocess.run(
            [sys.executable, "-m", "mtrl.cli", "tune", *args], capture_output=True, text=True
        )
        assert res.returncode == 2, res.stderr
        assert says in res.stderr and "Traceback" not in res.stderr
