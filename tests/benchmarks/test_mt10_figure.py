"""The MT10 figure's numbers (benchmarks/mt10_figure.py) on hand-made records: the success
curve averages every task's rate, budgets read off it, and a seed's figures survive the loss
of its run directory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import mt10_figure as mf  # noqa: E402


def _rec(steps: int, a: float, b: float) -> dict:
    return {
        "charts/env_steps": steps,
        "task/metaworld/reach-v3/success": a,
        "task/metaworld/push-v3/success": b,
        "task/metaworld/push-v3/return": 99.0,
    }


def test_the_curve_is_the_mean_over_tasks_and_budgets_interpolate() -> None:
    records = [{"charts/env_steps": 10}, _rec(100, 0.0, 0.2), _rec(300, 1.0, 0.6)]
    steps, values = mf.success_curve(records)
    assert steps.tolist() == [100.0, 300.0]
    np.testing.assert_allclose(values, [0.1, 0.8])
    assert mf.at_budget(steps, values, 200) == pytest.approx(0.45)
    assert mf.at_budget(steps, values, 301) is None
    assert mf.spread([0.2, None, 0.6, 0.4]) == {"median": 0.4, "min": 0.2, "max": 0.6, "n": 3}
    assert mf.spread([None])["n"] == 0


def test_a_seed_keeps_its_curve_and_greedy_figure_without_its_run_dir(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lines = [_rec(250_000, 0.2, 0.4), _rec(500_000, 0.6, 1.0)]
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    tasks = {"metaworld/reach-v3": {"greedy_success": 0.5}, "metaworld/push-v3": {}}
    doc = {
        "git_commit": "abc",
        "runs": [{"seed": 3, "run_dir": str(run_dir), "env_steps": 5e5, "tasks": tasks}],
    }
    (tmp_path / "learning.json").write_text(json.dumps(doc))
    [run] = mf.load_runs([tmp_path / "learning.json"], {})
    assert run["greedy_success"] == 0.5
    figures = mf.arm_figures([run])
    assert figures["train_success_at"]["250000"]["median"] == pytest.approx(0.3)
    assert figures["train_success_at"]["500000"]["median"] == pytest.approx(0.8)
    assert figures["train_success_at"]["1000000"]["n"] == 0
    # Stored in the figure's JSON, the curve is read back once the run directory is gone.
    (run_dir / "metrics.jsonl").unlink()
    (tmp_path / "mt10.json").write_text(json.dumps({"runs": {"sac": [run]}}))
    stored = mf.stored_curves(tmp_path / "mt10.json")
    [again] = mf.load_runs([tmp_path / "learning.json"], stored)
    assert again["success_curve"] == run["success_curve"]
    with pytest.raises(SystemExit, match=r"no earlier mt10\.json"):
        mf.load_runs([tmp_path / "learning.json"], {})
