"""The learning benchmark (benchmarks/learning.py): its pure statistics on synthetic metrics
records, and one tiny end-to-end run of the script."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import learning_plot as lp  # noqa: E402
import learning_stats as ls  # noqa: E402

from mtrl.errors import ConfigError  # noqa: E402

CARTPOLE = "gymnasium/CartPole-v1"
BASE: dict[str, Any] = {
    "name": "bench",
    "tasks": [{"env": CARTPOLE, "num_envs": 4, "target_score": 100}],
    "learner": {"learning_rate": 0.0006},
}


def records(task: str, points: list[tuple[int, float, float | None]]) -> list[dict[str, Any]]:
    """Metrics records as the trainer writes them: (task env steps, elapsed s, return)."""
    out = []
    for steps, seconds, ret in points:
        rec: dict[str, Any] = {
            "charts/env_steps": 2 * steps,
            "charts/elapsed_s": seconds,
            f"task/{task}/env_steps": steps,
        }
        if ret is not None:
            rec[f"task/{task}/return"] = ret
        out.append(rec)
    return out


# --- overrides ---------------------------------------------------------------------------------


def test_override_values_are_yaml() -> None:
    assert ls.parse_override("learner.learning_rate=1e-3") == (["learner", "learning_rate"], 1e-3)
    assert ls.parse_override("stop_at_target=true") == (["stop_at_target"], True)
    assert ls.parse_override("learner.model.torso=[64, 64]")[1] == [64, 64]
    assert ls.parse_override("tasks.0.num_envs=8") == (["tasks", 0, "num_envs"], 8)
    assert ls.parse_override("name=run1e3")[1] == "run1e3"
    with pytest.raises(ValueError, match="PATH=VALUE"):
        ls.parse_override("learner.learning_rate")


def test_overrides_set_nested_and_listed_keys_without_touching_the_input() -> None:
    out = ls.apply_overrides(
        BASE,
        [
            "learner.learning_rate=3e-4",
            "actors.mode=serial",  # a mapping the YAML does not have yet
            "tasks.0.num_envs=8",
        ],
    )
    assert out["learner"]["learning_rate"] == 3e-4
    assert out["actors"] == {"mode": "serial"}
    assert out["tasks"][0]["num_envs"] == 8
    assert BASE["learner"]["learning_rate"] == 0.0006 and "actors" not in BASE
    cfg = ls.validate(out, "test")
    assert cfg.learner.learning_rate == 3e-4 and cfg.actors.mode == "serial"


def test_bad_override_paths_fail_clearly() -> None:
    with pytest.raises(ValueError, match=r"tasks\.3: no such list item"):
        ls.apply_overrides(BASE, ["tasks.3.num_envs=8"])
    with pytest.raises(ValueError, match=r"name\.x: its parent is a str"):
        ls.apply_overrides(BASE, ["name.x=1"])
    typo = ls.apply_overrides(BASE, ["learner.learnin_rate=0.1"])
    with pytest.raises(ConfigError, match=r"learner\.learnin_rate: unknown key .*'learning_rate'"):
        ls.validate(typo, "bench.yaml with --set overrides")
    with pytest.raises(ConfigError, match=r"bench\.yaml.*nosuchsection"):
        ls.validate(ls.apply_overrides(BASE, ["nosuchsection.x=1"]), "bench.yaml")


# --- curves and figures ------------------------------------------------------------------------


def test_curve_skips_records_without_a_return() -> None:
    recs = records(CARTPOLE, [(100, 1.0, None), (200, 2.0, 10.0), (300, 3.0, float("nan"))])
    recs.append({"charts/env_steps": 800})  # a record without the task at all
    curve = ls.extract_curve(recs, CARTPOLE)
    assert curve.steps.tolist() == [200] and curve.returns.tolist() == [10.0]
    assert curve.seconds.tolist() == [2.0]


def test_first_crossing_is_the_first_record_at_target() -> None:
    curve = ls.extract_curve(
        records(CARTPOLE, [(100, 1.0, 50.0), (200, 2.5, 99.9), (300, 4.0, 100.0), (400, 5, 140)]),
        CARTPOLE,
    )
    assert ls.first_crossing(curve, 100.0) == (300.0, 4.0)
    assert ls.first_crossing(curve, 60.0) == (200.0, 2.5)
    assert ls.first_crossing(curve, 141.0) is None
    assert ls.first_crossing(curve, None) is None


def test_final_best_and_their_ratio() -> None:
    curve = ls.extract_curve(
        records(CARTPOLE, [(100, 1, 20.0), (200, 2, 120.0), (300, 3, 80.0)]), CARTPOLE
    )
    fig = ls.task_figures(curve, 100.0)
    assert fig["final"] == 80.0 and fig["best"] == 120.0 and fig["env_steps"] == 300.0
    assert fig["final_over_best"] == pytest.approx(80 / 120)
    assert (fig["steps_to_target"], fig["seconds_to_target"]) == (200.0, 2.0)
    # positive returns: plain final/best, whatever the random score
    assert ls.task_figures(curve, 100.0, random=20.0)["final_over_best"] == pytest.approx(80 / 120)
    # negative returns (Pendulum): measured from the random score, when declared
    assert ls.final_over_best(-400.0, -200.0, random=-1200.0) == pytest.approx(0.8)
    assert ls.final_over_best(-400.0, -200.0) is None
    assert ls.final_over_best(-1300.0, -1250.0, random=-1200.0) is None
    empty = ls.task_figures(ls.extract_curve([], CARTPOLE), 100.0)
    assert empty["final"] is None and empty["steps_to_target"] is None


def test_final_over_best_over_episode_windows() -> None:
    """The last window's mean against the best window's: noise in single episodes or short
    windows does not make a best that the run never held."""
    returns = [0.0] * 50 + [10.0] * 100 + [8.0] * 100
    assert ls.window_final_over_best(returns, window=100) == pytest.approx(8 / 10)
    assert ls.window_final_over_best(returns, window=1) == pytest.approx(8 / 10)
    spiky = [9.0, 5.0] * 100  # one lucky episode in two: every 100-episode mean is 7
    assert ls.window_final_over_best(spiky, window=100) == pytest.approx(1.0)
    assert ls.window_final_over_best(spiky, window=1) == pytest.approx(5 / 9)
    assert ls.window_final_over_best(returns[:99], window=100) is None
    # negative returns: from the random score, as final_over_best
    assert ls.window_final_over_best([-200.0] * 100 + [-400.0] * 100, 100, -1200.0) == (
        pytest.approx(0.8)
    )
    tasks = [ls.Task("cp", CARTPOLE, 475.0, 22.0), ls.Task("free", "x/free", None, None)]
    recs = records("cp", [(100, 1, 20.0)])
    figs = ls.seed_figures(tasks, recs, {}, {"cp": [1.0] * 100})
    assert figs["cp"]["final_over_best_100"] == 1.0 and figs["free"]["final_over_best_100"] is None
    assert ls.seed_figures(tasks, recs, {})["cp"]["final_over_best_100"] is None


def test_solved_at_end_needs_both_returns_at_target() -> None:
    assert ls.solved_at_end(100.0, 100.0, 100.0) is True
    assert ls.solved_at_end(120.0, 99.0, 100.0) is False
    assert ls.solved_at_end(120.0, None, 100.0) is False
    assert ls.solved_at_end(120.0, 120.0, None) is None


def test_normalise() -> None:
    assert ls.normalise(22.0, 22.0, 475.0) == 0.0
    assert ls.normalise(475.0, 22.0, 475.0) == 1.0
    assert ls.normalise(-200.0, -1200.0, -200.0) == 1.0
    assert ls.normalise(248.5, 22.0, 475.0) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="random score"):
        ls.normalise(1.0, 5.0, 5.0)


# --- aggregates --------------------------------------------------------------------------------


def test_aggregates_come_from_rliable_with_cis_around_the_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rliable import library as rly
    from rliable import metrics

    calls = []
    real = rly.get_interval_estimates

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(rly, "get_interval_estimates", spy)
    scores = np.random.default_rng(0).normal(0.7, 0.2, size=(10, 3))
    out = ls.aggregate(scores, reps=500, seed=3)
    assert len(calls) == 1 and calls[0]["reps"] == 500
    assert out["runs"] == 10 and out["tasks"] == 3
    assert out["iqm"]["point"] == pytest.approx(metrics.aggregate_iqm(scores))
    assert out["mean"]["point"] == pytest.approx(scores.mean())
    for stat in ("iqm", "mean"):
        s = out[stat]
        assert s["ci_low"] < s["point"] < s["ci_high"]
        assert s["ci_high"] - s["ci_low"] < 0.5
    before = np.random.get_state()[1].copy()
    assert ls.aggregate(scores, reps=500, seed=3) == out  # seeded: reproducible
    assert ls.aggregate(scores, reps=500, seed=4) != out
    np.testing.assert_array_equal(np.random.get_state()[1], before)  # global RNG left alone


def test_aggregate_leaves_out_runs_with_a_missing_score() -> None:
    scores = np.array([[0.5, 1.0], [np.nan, 1.0], [0.7, 0.9], [0.6, 0.8]])
    out = ls.aggregate(scores, reps=200)
    assert out["runs"] == 3
    assert out["mean"]["point"] == pytest.approx(np.nanmean(scores[[0, 2, 3]]))
    assert ls.aggregate(np.full((2, 2), np.nan), reps=200)["iqm"] is None


def suite_runs() -> tuple[list[ls.Task], list[dict[str, Any]]]:
    """Three seeds of a two-task suite plus a task without a target."""
    tasks = [
        ls.Task("cp", CARTPOLE, 475.0, 22.0),
        ls.Task("pend", "gymnasium/Pendulum-v1", -200.0, -1200.0),
        ls.Task("free", "x/free", None, None),
    ]
    runs = []
    for seed, (cp, pend) in enumerate([(475.0, -600.0), (248.5, -200.0), (22.0, -100.0)]):
        recs = records("cp", [(1000, 1.0, cp / 2), (2000, 2.0 + seed, cp)])
        recs += records("pend", [(500, 1.0, -900.0), (1500, 2.0, pend)])
        recs += records("free", [(700, 1.0, 5.0)])
        evals = {"cp": {"greedy": cp, "stochastic": cp - 1}, "pend": {"greedy": pend}}
        runs.append(ls.seed_figures(tasks, recs, evals))
    return tasks, runs


def test_suite_summary_aggregates_and_report() -> None:
    tasks, runs = suite_runs()
    summary = ls.summarise(tasks, runs)
    assert summary["cp"]["final"] == {"median": 248.5, "min": 22.0, "max": 475.0, "n": 3}
    assert summary["cp"]["solved_at_end"] == 1 and summary["pend"]["solved_at_end"] == 2
    assert summary["pend"]["steps_to_target"]["n"] == 2
    assert summary["free"]["solved_at_end"] == 0 and summary["free"]["greedy"]["n"] == 0
    matrix = ls.normalised_matrix(tasks[:2], runs, "final")
    np.testing.assert_allclose(matrix, [[1.0, 0.6], [0.5, 1.0], [0.0, 1.1]])
    agg = ls.suite_aggregates(tasks, runs, reps=300)
    assert agg["tasks"] == ["cp", "pend"]  # no target: reported, not aggregated
    assert agg["final"]["mean"]["point"] == pytest.approx(matrix.mean())
    assert agg["greedy"]["runs"] == 3
    text = ls.format_report("suite", summary, agg)
    assert "cp (3 seeds; solved at end: 1/3)" in text
    assert "248.5 [22.0, 475.0]" in text and "final  iqm" in text
    assert "final/best (100)" in text


# --- curves plot -------------------------------------------------------------------------------


def test_curve_band_and_png(tmp_path: Path) -> None:
    seeds = [
        ls.extract_curve(records("cp", [(0, 0, 10.0), (1000, 1, 110.0), (2000, 2, 210.0)]), "cp"),
        ls.extract_curve(records("cp", [(100, 0, 30.0), (900, 1, 90.0), (1800, 2, 150.0)]), "cp"),
    ]
    grid = lp.common_grid(seeds, points=5)
    assert grid[0] == 100 and grid[-1] == 1800  # no extrapolation
    matrix = lp.on_grid(seeds, grid)
    assert matrix.shape == (2, 5) and matrix[0, 0] == pytest.approx(20.0)
    panel = lp.task_panel("cp", [*seeds, ls.extract_curve([], "cp")], 100.0, reps=300, seed=0)
    assert len(panel.curves) == 2 and panel.band is not None
    band = panel.band
    np.testing.assert_allclose(band["mean"], lp.on_grid(seeds, panel.grid).mean(axis=0))
    assert (band["ci_low"] <= band["mean"] + 1e-9).all()
    assert (band["mean"] <= band["ci_high"] + 1e-9).all()
    empty = lp.task_panel("none", [], None, reps=300, seed=0)
    png = lp.plot_panels([panel, empty], tmp_path / "sub" / "curves.png", "test")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000


# --- the script --------------------------------------------------------------------------------


def test_unknown_override_fails_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import learning

    config = tmp_path / "tiny.yaml"
    config.write_text(json.dumps(BASE))
    argv = [str(config), "--set", "learner.learnin_rate=0.1", "--work-dir", str(tmp_path / "w")]
    assert learning.main([*argv, "--out-dir", str(tmp_path)]) == 2
    assert "did you mean 'learning_rate'" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_a_failed_training_is_reported_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import learning
    import learning_runs

    def failing(*args: str) -> list[str]:
        return [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"]

    monkeypatch.setattr(learning_runs, "_mtrl", failing)
    config = tmp_path / "tiny.yaml"
    config.write_text(json.dumps(BASE))
    argv = [str(config), "--seed-list=4", f"--work-dir={tmp_path / 'w'}", "--reps=100"]
    assert learning.main([*argv, f"--out-dir={tmp_path}"]) == 1
    assert "failed seeds: [4]" in capsys.readouterr().err
    doc = json.loads((tmp_path / "learning_tiny.json").read_text())
    (run,) = doc["runs"]
    assert run["seed"] == 4 and "exited with 3" in run["error"] and "tasks" not in run
    assert "boom" in (tmp_path / "w" / "logs" / "seed4.train.log").read_text()
    assert doc["summary"][CARTPOLE]["seeds"] == 0


TINY = """
name: tiny
total_env_steps: 2000
tasks:
  - env: gymnasium/CartPole-v1
    num_envs: 4
    target_score: 30
actors: {mode: serial}
learner: {unroll_length: 20, batch_size: 4}
tracking: {log_every_s: 0.2}
"""


@pytest.mark.slow
def test_end_to_end_two_seeds(tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "learning.py"),
            str(config),
            "--seeds=2",
            "--jobs=2",
            "--eval-episodes=2",
            "--reps=200",
            "--set=learner.learning_rate=1e-3",
            f"--work-dir={tmp_path / 'work'}",
            f"--out-dir={tmp_path / 'out'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "out" / "learning_tiny.json").read_text())
    assert (tmp_path / "out" / "learning_tiny.png").stat().st_size > 5_000
    assert doc["seeds"] == [0, 1] and doc["overrides"] == ["learner.learning_rate=1e-3"]
    assert doc["resolved_config"]["learner"]["learning_rate"] == 1e-3
    assert doc["git_commit"] and doc["machine"]["cpu_count"]
    assert 0 < doc["wall_s_total"] <= wall
    for seed, run in enumerate(doc["runs"]):
        assert run["seed"] == seed and run["error"] is None
        assert Path(run["run_dir"]).name.startswith(f"tiny__{seed}__")
        assert run["env_steps"] >= 2000 and run["train_wall_s"] > 0
        fig = run["tasks"][CARTPOLE]
        assert fig["final"] is not None and fig["best"] >= fig["final"]
        assert fig["greedy"] is not None and fig["stochastic"] is not None
        assert isinstance(fig["solved_at_end"], bool)
        assert "final_over_best_100" in fig  # None when the run finished < 100 episodes
        saved = yaml_load(tmp_path / "work" / "configs" / f"seed{seed}.yaml")
        assert saved["seed"] == seed and saved["tracking"]["wandb"]["mode"] == "disabled"
    assert doc["runs"][0]["run_dir"] != doc["runs"][1]["run_dir"]
    assert doc["summary"][CARTPOLE]["seeds"] == 2
    for key in ("final", "greedy"):
        iqm = doc["aggregates"][key]["iqm"]
        assert iqm["ci_low"] <= iqm["point"] <= iqm["ci_high"]
    assert CARTPOLE in doc["curves"] and "mean" in doc["curves"][CARTPOLE]
    assert "normalised score over gymnasium/CartPole-v1" in proc.stdout


def yaml_load(path: Path) -> Any:
    import yaml

    return yaml.safe_load(path.read_text())


def test_success_rates_are_reported_where_the_env_reports_success() -> None:
    tasks = [ls.Task("reach", "metaworld/reach-v3", None), ls.Task("cp", "c", 475.0)]
    records = [
        {"task/reach/return": 10.0, "task/reach/env_steps": 100, "task/reach/success": 0.1},
        {"task/reach/return": 90.0, "task/reach/env_steps": 200, "task/reach/success": 0.6},
        {"task/cp/return": 50.0, "task/cp/env_steps": 200},
    ]
    evals = {"reach": {"greedy": 95.0, "greedy_success": 0.8}, "cp": {"greedy": 60.0}}
    fig = ls.seed_figures(tasks, records, evals)
    assert (fig["reach"]["final_success"], fig["reach"]["greedy_success"]) == (0.6, 0.8)
    assert fig["cp"]["final_success"] is None and fig["cp"]["greedy_success"] is None
    summary = ls.summarise(tasks, [fig])
    text = ls.format_report("mt", summary, ls.suite_aggregates(tasks, [fig], reps=10))
    reach, cp = text.split("\ncp (")
    assert "success (greedy)  0.80 [0.80, 0.80]" in reach and "success" not in cp
