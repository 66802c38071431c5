"""benchmarks/slow_sync.py's ``--modes`` entries: a sync mode, or DiLoCo with its outer step
(``diloco:LR:MOMENTUM``) beside the others; a bad entry is refused before any run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from slow_sync import parse_arm, run_config  # noqa: E402


def test_a_diloco_entry_carries_its_outer_step_into_the_runs_config(tmp_path: Path) -> None:
    assert parse_arm("local_sgd") == ("local_sgd", {})
    assert parse_arm("diloco:0.5:0.25") == (
        "diloco",
        {"outer_learning_rate": 0.5, "outer_momentum": 0.25},
    )
    base = {"tasks": [{"env": "gymnasium/CartPole-v1"}], "learner": {"parallel": {"x": 1}}}
    path = run_config(base, *parse_arm("diloco:0.5:0.25"), 7, 3, tmp_path)
    cfg = yaml.safe_load(path.read_text())
    assert cfg["learner"]["parallel"] == {
        "x": 1,
        "sync": "diloco",
        "sync_every": 7,
        "outer_learning_rate": 0.5,
        "outer_momentum": 0.25,
    }
    assert cfg["seed"] == 3 and cfg["stop_at_target"] is True


@pytest.mark.parametrize("entry", ["async:1:0.5", "diloco:0.5", "diloco:a:b"])
def test_a_bad_entry_is_refused_in_one_line_before_any_run(entry: str) -> None:
    res = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "slow_sync.py"), "--modes", entry],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and entry in res.stderr
