"""`mtrl eval` on a checkpoint of a real (short) CartPole training, and the final greedy eval
that training ran on its in-memory model through the same code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mtrl.checkpoint import list_checkpoints, save_checkpoint
from mtrl.cli import main
from mtrl.config import ExperimentConfig, parse_config
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import get_plugins
from mtrl.train.evaluate import (
    EVAL_SEED_OFFSET,
    build_model,
    eval_size,
    evaluate,
    evaluate_model,
    load_for_eval,
    run_episodes,
)
from mtrl.train.progress import TaskResult, TrainResult
from mtrl.train.task_envs import build_env, task_spaces
from mtrl.train.trainer import Trainer

CARTPOLE = "gymnasium/CartPole-v1"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TrainResult]:
    """A run directory whose checkpoint holds a CartPole policy trained for 80k steps (~10 s),
    and the training's result (with its final greedy evaluation of 10 episodes)."""
    run_dir = tmp_path_factory.mktemp("run")
    cfg = parse_config(
        f"""
        name: evaltest
        total_env_steps: 80000
        tasks:
          - env: {CARTPOLE}
            num_envs: 16
        actors: {{mode: serial}}
        learner: {{batch_size: 16, model: {{encoder_dim: 64, torso: [64, 64]}}}}
        tracking: {{wandb: {{mode: disabled}}}}
        """
    )
    trainer = Trainer(cfg, write_run_dir=False, console=False)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    state = {
        "config": cfg.model_dump(mode="json"),
        "learner": trainer.learner.state_dict(),
        "env_steps": trainer.env_steps,
    }
    save_checkpoint(run_dir, state, trainer.env_steps, keep_last=2)
    return run_dir, result


@pytest.fixture(scope="module")
def trained_run(trained: tuple[Path, TrainResult]) -> Path:
    return trained[0]


def _random_mean_return(episodes: int) -> float:
    env = get_plugins().envs.get(CARTPOLE).build(8, seed=1_000_000)
    rng = np.random.default_rng(0)

    def policy(task: int, obs: np.ndarray, valid: np.ndarray) -> tuple[None, np.ndarray, None]:
        return None, rng.integers(0, 2, size=len(obs)), None

    try:
        returns, *_ = run_episodes(env, policy, 0, episodes, 10_000)
    finally:
        env.close()
    return float(np.mean(returns))


def test_trained_cartpole_policy_beats_random(trained_run: Path) -> None:
    results = evaluate(load_for_eval(trained_run), episodes=16)
    assert [r.mode for r in results] == ["greedy", "stochastic"]
    random_mean = _random_mean_return(16)  # ≈ 22
    for r in results:
        assert r.task == CARTPOLE and r.episodes == 16 and len(r.returns) == 16
        assert r.mean_return > 3 * random_mean, (r.mode, r.mean_return, random_mean)
        assert r.normalized_score is not None and r.normalized_score > 0.1
        assert r.std_return == pytest.approx(np.std(r.returns))


def test_final_greedy_eval_of_training_is_what_mtrl_eval_plays(
    trained: tuple[Path, TrainResult],
) -> None:
    """The trainer's in-memory model and the checkpoint's, on the same eval seeds: one number."""
    run_dir, result = trained
    (task,) = result.tasks
    assert result.greedy_episodes == 10
    assert task.greedy_eval is not None and np.isfinite(task.greedy_eval)
    assert task.greedy_eval > 3 * _random_mean_return(10)  # the trained policy, not a fresh one
    (again,) = evaluate(load_for_eval(run_dir), episodes=10, modes=("greedy",))
    assert again.episodes == 10
    assert task.greedy_eval == pytest.approx(again.mean_return)


def test_eval_envs_are_seeded_apart_from_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the final eval and `mtrl eval` share: task seed + EVAL_SEED_OFFSET, per mode."""
    cfg = parse_config(
        f"seed: 5\ntasks: [{{env: {CARTPOLE}}}, {{env: {CARTPOLE}, seed: 9, name: b}}]"
    )
    specs = [get_plugins().envs.get(CARTPOLE)] * 2
    model = MultiTaskModel(
        [TaskSpaces(*task_spaces(specs[0], cfg, 0, None))] * 2, cfg.learner.model
    )
    seeds: list[int] = []

    def spy(spec: Any, cfg: Any, i: int, num_envs: int, seed: int) -> Any:
        seeds.append(seed)
        return build_env(spec, cfg, i, num_envs, seed)

    monkeypatch.setattr("mtrl.train.evaluate.build_env", spy)
    results = evaluate_model(model, cfg, specs, [0, 1], episodes=2)
    assert [r.episodes for r in results] == [2, 2, 2, 2]
    offset = EVAL_SEED_OFFSET
    assert seeds == [5 + offset, 5 + offset, 9 + offset, 9 + offset]  # greedy, stochastic


def test_multi_agent_tasks_are_evaluated_in_whole_games() -> None:
    """``num_envs`` of a multi-agent env counts agent slots; the eval env holds one slot per
    episode, rounded up to whole games and capped at the task's own count."""
    assert [eval_size(e, 6, 3) for e in (1, 3, 4, 10)] == [3, 3, 6, 6]
    assert [eval_size(e, 16, 1) for e in (1, 10, 20)] == [1, 10, 16]
    pytest.importorskip("mpe2")
    spread = "pettingzoo/mpe/simple_spread_v3"
    cfg = parse_config(f"tasks: [{{env: {spread}, num_envs: 6, env_kwargs: {{max_cycles: 5}}}}]")
    specs = [get_plugins().envs.get(spread)]
    model = MultiTaskModel([TaskSpaces(*task_spaces(specs[0], cfg, 0, None))], cfg.learner.model)
    results = evaluate_model(model, cfg, specs, [0], episodes=4, modes=("greedy",))
    assert results[0].episodes == 4 and np.isfinite(results[0].mean_return)


def test_solved_needs_the_greedy_eval_at_target_when_it_ran() -> None:
    def result(train: float, greedy: float | None) -> TaskResult:
        return TaskResult("t", 100, 5, train, None, target_score=50.0, greedy_eval=greedy)

    assert result(60, None).solved is True  # no eval ran: the training return decides
    assert result(60, 55).solved is True
    assert result(60, 40).solved is False  # learned only with exploration noise
    assert result(40, 60).solved is False


def test_episode_counting_skips_reset_steps_and_fills_quotas() -> None:
    """CartPole pays 1 per step, so return == length unless a reset step were counted."""
    env = get_plugins().envs.get(CARTPOLE).build(4, seed=3)

    def always_left(task: int, obs: np.ndarray, valid: np.ndarray) -> tuple[None, np.ndarray, None]:
        return None, np.zeros(len(obs), np.int64), None

    try:
        returns, lengths, _ = run_episodes(env, always_left, 0, 10, 10_000)
    finally:
        env.close()
    assert len(returns) == 10  # quotas 3, 3, 2, 2 over the four copies
    assert returns == [float(n) for n in lengths]
    assert all(5 <= n <= 20 for n in lengths)  # pushing one way falls over fast


def test_cli_eval_json_parses(trained_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (ckpt,) = list_checkpoints(trained_run)
    args = ["eval", str(ckpt), "--greedy", "--episodes", "3", "--json", "--tasks", CARTPOLE]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["checkpoint"] == str(ckpt) and doc["env_steps"] >= 80000
    (row,) = doc["results"]
    assert row["task"] == CARTPOLE and row["mode"] == "greedy" and row["episodes"] == 3
    assert set(row) >= {"mean_return", "std_return", "normalized_score", "mean_length"}


def test_cli_eval_table(trained_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(trained_run), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert CARTPOLE in out and "greedy" in out and "stochastic" in out and "±" in out


def test_cli_eval_user_errors_exit_2(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(tmp_path / "nope")]) == 2
    assert "nope: no such run directory or checkpoint file" in capsys.readouterr().err
    assert main(["eval", str(tmp_path)]) == 2
    assert "no checkpoints" in capsys.readouterr().err
    assert main(["eval", str(trained_run), "--tasks", "gymnasium/CartPol-v1"]) == 2
    err = capsys.readouterr().err
    assert "no task named 'gymnasium/CartPol-v1'" in err and f"did you mean '{CARTPOLE}'" in err
    assert main(["eval", str(trained_run), "--episodes", "0"]) == 2
    assert "--episodes must be at least 1" in capsys.readouterr().err


def test_cli_eval_falls_back_past_a_corrupt_checkpoint(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (good,) = list_checkpoints(trained_run)
    (run / "checkpoints" / good.name).write_bytes(good.read_bytes())
    newer = run / "checkpoints" / "ckpt_999999999999.pt"
    newer.write_bytes(good.read_bytes()[:1000])  # a checkpoint cut short by a crash
    assert main(["eval", str(run), "--greedy", "--episodes", "1", "--json"]) == 0
    captured = capsys.readouterr()
    assert "warning: skipping" in captured.err and "ckpt_999999999999.pt" in captured.err
    assert json.loads(captured.out)["checkpoint"].endswith(good.name)


@pytest.fixture(scope="module")
def three_task_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory whose checkpoint holds an untrained agent on three tasks of different
    spaces (what the workers test compares is how episodes are played, not what was learnt)."""
    run_dir = tmp_path_factory.mktemp("three")
    cfg = parse_config(
        f"""
        name: evalworkers
        tasks:
          - {{env: {CARTPOLE}, num_envs: 2}}
          - {{env: gymnasium/Acrobot-v1, num_envs: 2}}
          - {{env: gymnasium/Pendulum-v1, num_envs: 2}}
        tracking: {{wandb: {{mode: disabled}}}}
        """
    )
    save_untrained(run_dir, cfg)
    return run_dir


def save_untrained(run_dir: Path, cfg: ExperimentConfig) -> None:
    """Checkpoint a fresh (untrained) agent for ``cfg`` into ``run_dir``."""
    plugins = get_plugins()
    specs = [plugins.envs.get(t.env) for t in cfg.tasks]
    spaces = [TaskSpaces(*task_spaces(s, cfg, i, None)) for i, s in enumerate(specs)]
    state = {
        "config": cfg.model_dump(mode="json"),
        "learner": {"model": build_model(cfg, spaces, plugins).state_dict()},
        "env_steps": 0,
    }
    save_checkpoint(run_dir, state, 0, keep_last=1)


def test_eval_workers_give_the_results_of_one_process(three_task_run: Path) -> None:
    """Tasks played in two spawned processes: every task and mode keeps its env seeds and its
    torch seed, so returns (stochastic ones included) match one process's to the bit, in the
    same order."""
    ckpt = load_for_eval(three_task_run)
    alone = evaluate(ckpt, episodes=3)
    apart = evaluate(ckpt, episodes=3, workers=2)
    assert [(r.task, r.mode) for r in apart] == [(r.task, r.mode) for r in alone]
    assert len(alone) == 6 and all(r.episodes == 3 for r in alone)
    assert [r.to_json() for r in apart] == [r.to_json() for r in alone]


def test_cli_eval_workers(three_task_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["eval", str(three_task_run), "--greedy", "--episodes", "2", "--json"]
    assert main([*args, "--workers", "3"]) == 0
    apart = json.loads(capsys.readouterr().out)["results"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["results"] == apart
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--workers", "0"])
    assert exit_info.value.code == 2
    assert "--workers" in capsys.readouterr().err


def test_a_worker_killed_mid_task_is_named_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A task whose env code kills its process (chaos/wrap's real SIGKILL, which fires in eval
    workers as in actors): `mtrl eval --workers` exits 2 with one line naming that task."""
    cfg = parse_config(
        f"""
        name: evalkill
        tasks:
          - {{env: {CARTPOLE}, num_envs: 2}}
          - {{env: chaos/wrap, name: doomed, num_envs: 2, env_kwargs: {{kill_after: 5}}}}
        tracking: {{wandb: {{mode: disabled}}}}
        """
    )
    save_untrained(tmp_path, cfg)
    assert main(["eval", str(tmp_path), "--episodes", "2", "--workers", "2"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    key = cfg.tasks[1].key
    assert "eval worker process exited, killed by SIGKILL" in line
    assert f"while playing {key}" in line and f"--tasks {key}" in line
