"""The mtrl command line, run as users run it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from mtrl.cli import main

ROOT = Path(__file__).parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mtrl.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_validate_shipped_config_exits_0() -> None:
    res = _run("validate", "configs/quickstart.yaml")
    assert res.returncode == 0, res.stderr
    assert "ok (3 tasks" in res.stdout


def test_validate_broken_config_prints_one_line_per_problem_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("tasks:\n  - env: gymnasium/CartPol-v1\n    num_envs: 0\n")
    res = _run("validate", str(bad))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert lines == [
        f"{bad}:2: tasks[0].env: unknown env id 'gymnasium/CartPol-v1'; did you mean "
        "'gymnasium/CartPole-v1' or 'gymnasium/CartPole-v0'?",
        f"{bad}:3: tasks[0].num_envs: Input should be greater than 0 (got 0)",
    ]
    assert "Traceback" not in res.stderr


def test_validate_check_envs_catches_bad_env_kwargs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "kw.yaml"
    cfg.write_text("tasks:\n  - env: gymnasium/CartPole-v1\n    env_kwargs: {colour: red}\n")
    assert main(["validate", str(cfg)]) == 0
    assert main(["validate", "--check-envs", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "tasks[0].env_kwargs: cannot build gymnasium/CartPole-v1" in err
    assert "colour" in err


def test_multi_agent_num_envs_must_be_whole_games_at_validate_and_train(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A multi-agent env's ``num_envs`` counts agent slots: a count that is not whole games is
    refused in one line naming the field and the nearest counts that work; ``--check-envs``
    builds the smallest whole game, with the task's kwargs."""
    pytest.importorskip("mpe2")
    cfg = tmp_path / "spread.yaml"
    cfg.write_text(
        "tasks:\n  - env: pettingzoo/mpe/simple_spread_v3\n    num_envs: 4\n"
        f"tracking: {{run_dir: {tmp_path / 'runs'}}}\n"
    )
    assert main(["validate", str(cfg)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"{cfg}:3: tasks[0].num_envs: pettingzoo/mpe/simple_spread_v3 runs 3 agent slots per "
        "game: num_envs 4 is not a multiple of 3 (use 3 or 6)"
    ]
    res = _run("train", str(cfg))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "tasks[0].num_envs: pettingzoo/mpe/simple_spread_v3 runs 3 agent slots" in res.stderr
    assert not (tmp_path / "runs").exists()
    cfg.write_text(
        "tasks:\n  - env: pettingzoo/mpe/simple_spread_v3\n    num_envs: 6\n"
        "    env_kwargs: {max_cycles: 10}\n"
    )
    assert main(["validate", "--check-envs", str(cfg)]) == 0, capsys.readouterr().err


def test_envs_lists_spaces_and_filters(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["envs", "--plugin", "gymnasium", "--match", "cartpole-v1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {
            "id": "gymnasium/CartPole-v1",
            "plugin": "gymnasium",
            "observation": "float32[4]",
            "action": "Discrete(2)",
        }
    ]
    assert main(["envs", "--match", "ALE/Pong-v5", "--json"]) == 0
    (pong,) = [r for r in json.loads(capsys.readouterr().out) if r["id"].endswith("ALE/Pong-v5")]
    assert pong["observation"] == "uint8[4,84,84] in [0, 255]"


def test_unknown_plugin_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["envs", "--plugin", "nosuch"]) == 2
    assert "no plugin named 'nosuch'" in capsys.readouterr().err


def test_plugins_table_and_json() -> None:
    res = _run("plugins")
    assert res.returncode == 0 and "gymnasium" in res.stdout
    res = _run("plugins", "--json")
    assert {"gymnasium", "envpool", "pettingzoo"} <= {i["name"] for i in json.loads(res.stdout)}


def test_schema_is_json(tmp_path: Path) -> None:
    res = _run("schema")
    assert json.loads(res.stdout)["title"] == "mtrl experiment config"
    out = tmp_path / "schema.json"
    assert _run("schema", "-o", str(out)).returncode == 0
    assert json.loads(out.read_text())["required"] == ["tasks"]


@pytest.mark.parametrize("cmd", [[], ["plugins"], ["envs"], ["validate"], ["schema"]])
def test_help_everywhere(cmd: list[str]) -> None:
    res = _run(*cmd, "--help")
    assert res.returncode == 0 and "usage: mtrl" in res.stdout


def test_missing_config_file_is_a_user_error() -> None:
    res = _run("validate", "nope.yaml")
    assert res.returncode == 2 and "nope.yaml: cannot read config" in res.stderr


def test_train_with_bad_env_kwargs_is_a_user_error(tmp_path: Path) -> None:
    cfg = tmp_path / "kw.yaml"
    cfg.write_text(
        "tasks:\n  - env: gymnasium/CartPole-v1\n    env_kwargs: {colour: red}\n"
        f"tracking: {{run_dir: {tmp_path / 'runs'}}}\n"
    )
    res = _run("train", str(cfg))
    assert res.returncode == 2
    assert "error: tasks[0].env_kwargs: gymnasium/CartPole-v1: cannot build" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "runs").exists()  # nothing half-made is left behind


def test_train_with_an_env_kwarg_value_the_env_refuses_is_a_user_error(tmp_path: Path) -> None:
    """A factory's ``ValueError`` (a value out of range) is reported like a ``TypeError`` (an
    unknown kwarg): one line naming the task, the env and the kwargs, exit 2, no traceback."""
    pytest.importorskip("pettingzoo")
    cfg = tmp_path / "seat.yaml"
    cfg.write_text(
        "tasks:\n  - env: pettingzoo/classic/tictactoe_v3\n    env_kwargs: {seat: 5}\n"
        f"tracking: {{run_dir: {tmp_path / 'runs'}}}\n"
    )
    res = _run("train", str(cfg))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert (
        "error: tasks[0].env_kwargs: pettingzoo/classic/tictactoe_v3: cannot build with "
        "{'seat': 5}: pettingzoo/classic/tictactoe_v3: seat must be 0, 1 or None"
    ) in res.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("episodes", [4, 0])
def test_train_table_and_last_record_show_the_final_greedy_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], episodes: int
) -> None:
    """A tiny real training: the table's "greedy eval" column and ``eval/<task>/greedy_return``
    in the last metrics record, both the same finite number; neither with 0 episodes."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(
        "name: tiny\ntotal_env_steps: 3000\n"
        "tasks:\n  - env: gymnasium/CartPole-v1\n    num_envs: 4\n    target_score: 475\n"
        "actors: {mode: serial}\nlearner: {batch_size: 4, unroll_length: 16}\n"
        f"tracking: {{run_dir: {tmp_path / 'runs'}, console: quiet, log_every_s: 60, "
        f"csv: false, wandb: {{mode: disabled}}, final_eval_episodes: {episodes}}}\n"
    )
    assert main(["train", str(cfg)]) == 0
    out = capsys.readouterr().out
    (run_dir,) = (tmp_path / "runs").glob("tiny__*")
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    key = "eval/gymnasium/CartPole-v1/greedy_return"
    if episodes == 0:
        assert "greedy eval" not in out and key not in last
        return
    header = next(line for line in out.splitlines() if "mean return (last 20)" in line)
    row = next(line for line in out.splitlines() if "gymnasium/CartPole-v1" in line)
    cells = [c.strip() for c in row.split("│")[1:-1]]
    names = [c.strip() for c in header.split("┃")[1:-1]]
    assert names[3:5] == ["mean return (last 20)", "greedy eval"]
    greedy = last[key]
    assert (
        isinstance(greedy, float) and math.isfinite(greedy) and greedy >= 8
    )  # CartPole: ≥ 8 steps
    assert cells[4] == f"{greedy:.1f}"
    assert "solved" not in row  # far from 475 after 3000 steps


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["train", "configs/quickstart.yaml", "--total-env-steps", "0"], "--total-env-steps"),
        (["train", "configs/quickstart.yaml", "--seed", "-1"], "--seed"),
        (["train", "configs/quickstart.yaml", "--total-env-steps", "1e6"], "--total-env-steps"),
        (["eval", "runs/x", "--seed", "-5"], "--seed"),
    ],
)
def test_bad_numeric_flags_exit_2_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}:" in err and "Traceback" not in err
