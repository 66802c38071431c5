"""The Meta-World figure's numbers (benchmarks/metaworld_figure.py) on hand-made records: the
success curve averages every task's rate, budgets read off it, a seed's figures survive the
loss of its run directory, and each suite has its own reference lines."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import metaworld_figure as mf  # noqa: E402


def _rec(steps: int, a: float, b: float, wall: float | None = None) -> dict:
    return {
        "charts/env_steps": steps,
        **({} if wall is None else {"charts/elapsed_s": wall}),
        "task/metaworld/reach-v3/success": a,
        "task/metaworld/push-v3/success": b,
        "task/metaworld/push-v3/return": 99.0,
    }


def test_the_curve_is_the_mean_over_tasks_and_budgets_interpolate() -> None:
    records = [{"charts/env_steps": 10}, _rec(100, 0.0, 0.2, 5.0), _rec(300, 1.0, 0.6)]
    steps, values, wall = mf.success_curve(records)
    assert steps.tolist() == [100.0, 300.0]
    np.testing.assert_allclose(values, [0.1, 0.8])
    assert wall[0] == 5.0 and np.isnan(wall[1])
    assert mf.at_budget(steps, values, 200) == pytest.approx(0.45)
    assert mf.at_budget(steps, values, 301) is None
    assert mf.spread([0.2, None, 0.6, 0.4]) == {"median": 0.4, "min": 0.2, "max": 0.6, "n": 3}
    assert mf.spread([None])["n"] == 0


def test_a_seed_keeps_its_curve_and_greedy_figure_without_its_run_dir(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lines = [_rec(250_000, 0.2, 0.4, 600.0), _rec(500_000, 0.6, 1.0, 1200.0)]
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    tasks = {"metaworld/reach-v3": {"greedy_success": 0.5}, "metaworld/push-v3": {}}
    doc = {
        "git_commit": "abc",
        "runs": [{"seed": 3, "run_dir": str(run_dir), "env_steps": 5e5, "tasks": tasks}],
    }
    (tmp_path / "learning.json").write_text(json.dumps(doc))
    [run] = mf.load_runs([tmp_path / "learning.json"], {})
    assert run["greedy_success"] == 0.5
    assert run["success_curve"]["wall_s"] == [600.0, 1200.0]
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
    with pytest.raises(SystemExit, match=r"no earlier figure JSON"):
        mf.load_runs([tmp_path / "learning.json"], {})


def _run(seed: int, per_task: dict[str, float | None]) -> dict:
    return {
        "seed": seed,
        "env_steps": 1000,
        "greedy_success": None,
        "per_task_greedy": per_task,
        "train_wall_s": 3600.0 * (seed + 1),
        "success_curve": {"steps": [1000.0], "success": [0.5], "wall_s": [10.0]},
    }


def test_the_final_agents_iqm_and_per_task_table_come_from_seeds_by_tasks() -> None:
    runs = [
        _run(0, {"b": 1.0, "a": 0.0, "c": 0.5, "d": 0.25}),
        _run(1, {"b": 0.5, "a": None, "c": 1.0, "d": 0.75}),
    ]
    tasks, matrix = mf.greedy_matrix(runs)
    assert tasks == ["a", "b", "c", "d"]
    assert np.isnan(matrix[1, 0]) and matrix[0, 1] == 1.0
    fig = mf.arm_figures(runs, reps=200)
    # A seed with a task missing is left out of the aggregate (rliable needs whole rows).
    agg = fig["greedy_aggregate"]
    assert agg["runs"] == 1 and agg["tasks"] == 4
    # IQM of [0, 1, 0.5, 0.25]: the middle half is {0.25, 0.5}.
    assert agg["iqm"]["point"] == pytest.approx(0.375)
    assert agg["mean"]["point"] == pytest.approx(0.4375)
    assert fig["per_task_greedy"]["b"] == {"median": 0.75, "min": 0.5, "max": 1.0, "n": 2}
    assert fig["per_task_greedy"]["a"]["n"] == 1
    assert fig["train_wall_s"]["median"] == pytest.approx(5400.0)


def test_the_figure_is_written_under_its_name(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    learning = tmp_path / "learning.json"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lines = [_rec(250_000, 0.2, 0.4, 600.0), _rec(500_000, 0.6, 1.0, 1200.0)]
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    tasks = {
        "metaworld/reach-v3": {"greedy_success": 0.5},
        "metaworld/push-v3": {"greedy_success": 0.1},
    }
    doc = {"runs": [{"seed": 0, "run_dir": str(run_dir), "env_steps": 5e5, "tasks": tasks}]}
    learning.write_text(json.dumps(doc))
    args = ["--arm", f"x={learning}", "--out-dir", str(tmp_path), "--name", "abl", "--reps", "100"]
    assert mf.main(args) == 0
    out = json.loads((tmp_path / "abl.json").read_text())
    assert (tmp_path / "abl.png").stat().st_size > 0
    assert out["figures"]["x"]["greedy_aggregate"]["mean"]["point"] == pytest.approx(0.3)
    assert not (tmp_path / "mt10.json").exists()


def test_the_suite_picks_its_reference_lines(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    learning = tmp_path / "learning.json"
    tasks = {"metaworld/reach-v3": {"greedy_success": 1.0}}
    curve = {"steps": [1e5, 2e5], "success": [0.1, 0.2]}
    run = {"seed": 0, "run_dir": str(tmp_path / "gone"), "env_steps": 2e5, "tasks": tasks}
    doc = {"runs": [run]}
    learning.write_text(json.dumps(doc))
    stored = {"runs": {"x": [{"source": str(learning), "seed": 0, "success_curve": curve}]}}
    (tmp_path / "mt50.json").write_text(json.dumps(stored))
    args = ["--arm", f"x={learning}", "--out-dir", str(tmp_path), "--name", "mt50"]
    assert mf.main([*args, "--suite", "mt50", "--reps", "100"]) == 0
    out = json.loads((tmp_path / "mt50.json").read_text())
    assert out["suite"] == "mt50"
    assert [r["success"] for r in out["references"]] == [0.60, 0.658, 0.720]
    with pytest.raises(SystemExit):
        mf.main([*args, "--suite", "mt5"])
