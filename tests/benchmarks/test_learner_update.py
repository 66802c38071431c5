"""benchmarks/learner_update.py: the learner's update alone on a config's smallest batch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import learner_update as lu  # noqa: E402


def test_times_the_quickstart_batch_and_writes_its_figures(tmp_path: Path) -> None:
    config = BENCH.parent / "configs" / "quickstart.yaml"
    assert lu.main([str(config), "--updates", "2", "--out-dir", str(tmp_path)]) == 0
    got = json.loads((tmp_path / "learner_update_quickstart.json").read_text())
    assert got["tasks"] == [
        "gymnasium/CartPole-v1",
        "minatar/breakout",
        "gymnasium/InvertedPendulum-v5",
    ]
    assert got["samples_per_update"] == 3 * 16 * 20  # one unroll of every task's envs
    assert got["updates_per_s"] == 1e3 / got["ms_per_update"] > 0


def test_box_spaces_run_a_suite_whose_envs_are_not_installed(tmp_path: Path) -> None:
    """MT10's shapes without Meta-World (the main venv has no metaworld plugin): its env ids
    are not checked, every task gets Box(39) / Box(4)."""
    config = BENCH.parent / "configs" / "mt10.yaml"
    argv = [str(config), "--box-spaces", "39:4", "--updates", "1", "--out-dir", str(tmp_path)]
    assert lu.main(argv) == 0
    got = json.loads((tmp_path / "learner_update_mt10.json").read_text())
    assert len(got["tasks"]) == 10 and got["ms_per_gradient_step"] > 0
