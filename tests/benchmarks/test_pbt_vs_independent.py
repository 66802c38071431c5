"""The PBT vs independent runs benchmark's figures (benchmarks/arm_figures.py): of a
run and of an arm on hand-made metrics records, and the clock that stamps records as they are
written."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import arm_figures as af  # noqa: E402
import learning_stats as ls  # noqa: E402

A = ls.Task("a", "env/a", target=100.0, random=0.0)
B = ls.Task("b", "env/b", target=10.0, random=2.0)


def rec(steps: int, a: float | None, b: float | None, elapsed: float = 0.0) -> dict[str, Any]:
    """A metrics record as the trainer writes it: each task's env steps are half the run's."""
    out: dict[str, Any] = {"charts/env_steps": steps, "charts/elapsed_s": elapsed}
    for name, ret in (("a", a), ("b", b)):
        out[f"task/{name}/env_steps"] = steps // 2
        if ret is not None:
            out[f"task/{name}/return"] = ret
    return out


def test_time_to_every_target_is_the_last_tasks_and_none_while_one_is_missing() -> None:
    assert af.time_to_every_target([30.0, 12.0, 55.0]) == 55.0
    assert af.time_to_every_target([30.0, None]) is None
    assert af.time_to_every_target([]) is None


def test_the_crossing_is_the_first_record_at_target_even_the_very_first() -> None:
    records = [rec(100, 100.0, None), rec(200, 50.0, 9.0), rec(300, 120.0, 10.0)]
    assert af.crossing_index(records, A) == 0  # index 0 is a record, not a missing second
    assert af.crossing_index(records, B) == 2  # >= target, as the learning benchmark counts
    assert af.crossing_index(records[1:2], B) is None
    assert af.crossing_index(records, ls.Task("a", "env/a", target=None)) is None


def test_a_runs_figures_are_on_the_arms_clock_not_its_own_elapsed_seconds() -> None:
    """A PBT member's ``charts/elapsed_s`` goes back after an exploit (it takes the copied
    member's); the figures use the stamps, the arm's seconds when each record was read."""
    records = [
        rec(1000, 40.0, 3.0, elapsed=10.0),
        rec(2000, 100.0, 6.0, elapsed=20.0),
        rec(3000, 90.0, 10.0, elapsed=5.0),  # an exploit: the other member's clock
        rec(4000, 95.0, 8.0, elapsed=15.0),
    ]
    fig = af.run_figures([A, B], records, [11.0, 22.0, 40.0, 51.0])
    a, b = fig["tasks"]["a"], fig["tasks"]["b"]
    assert (a["seconds_to_target"], a["steps_to_target"], a["run_env_steps_at_target"]) == (
        22.0,
        1000,
        2000,
    )
    assert (b["seconds_to_target"], b["steps_to_target"]) == (40.0, 1500)
    assert fig["seconds_to_every_target"] == 40.0  # b, the later of the two
    assert fig["run_env_steps_at_every_target"] == 3000
    assert a["final"] == 95.0 and a["final_normalised"] == pytest.approx(0.95)
    assert b["final_normalised"] == pytest.approx((8.0 - 2.0) / (10.0 - 2.0))
    # Over two tasks the IQM (a 25 % trimmed mean) is the mean.
    assert fig["final_mean"] == pytest.approx((0.95 + 0.75) / 2)
    assert fig["final_iqm"] == pytest.approx(fig["final_mean"])
    assert fig["env_steps"] == 4000 and fig["records"] == 4 and fig["last_record_s"] == 51.0


def test_a_run_that_misses_a_target_or_a_return_has_no_time_and_no_iqm() -> None:
    records = [rec(1000, 100.0, None), rec(2000, 100.0, None)]
    fig = af.run_figures([A, B], records, [5.0, 9.0])
    assert fig["tasks"]["a"]["seconds_to_target"] == 5.0
    assert fig["seconds_to_every_target"] is None
    assert fig["run_env_steps_at_every_target"] is None
    assert fig["final_iqm"] is None and fig["final_mean"] is None
    with pytest.raises(ValueError, match="stamps"):
        af.run_figures([A], records, [5.0])


def run(every: float | None, mean: float | None, **extra: Any) -> dict[str, Any]:
    return {"seconds_to_every_target": every, "final_mean": mean, **extra}


def test_the_best_run_is_at_every_target_soonest_then_the_higher_final_mean() -> None:
    assert af.best_run([run(300.0, 0.9), run(200.0, 0.5), run(None, 2.0)]) == 1
    assert af.best_run([run(200.0, 0.5), run(200.0, 0.8)]) == 1  # a tie: the better final
    assert af.best_run([run(None, 0.5), run(None, 0.8), run(None, None)]) == 1
    assert af.best_run([run(100.0, 1.0, error="crashed"), run(300.0, 0.2)]) == 1
    assert af.best_run([run(100.0, 1.0, error="crashed")]) is None
    assert af.best_run([]) is None


def summary(every: float | None, iqm: float | None) -> dict[str, Any]:
    return {"best_seconds_to_every_target": every, "best_final_iqm": iqm}


def test_the_target_needs_pbt_sooner_and_its_iqm_no_lower() -> None:
    assert af.verdict(summary(100.0, 1.0), summary(150.0, 1.0)) == {
        "sooner": True,
        "iqm_no_lower": True,
        "met": True,
    }
    assert af.verdict(summary(100.0, 0.9), summary(150.0, 1.0))["met"] is False
    assert af.verdict(summary(150.0, 1.2), summary(100.0, 1.0))["sooner"] is False
    assert af.verdict(summary(150.0, 1.2), summary(None, 1.0))["met"] is True
    neither = af.verdict(summary(None, 1.2), summary(None, 1.0))
    assert neither["sooner"] is False and neither["met"] is False
    assert af.verdict(summary(100.0, None), summary(150.0, 1.0))["iqm_no_lower"] is None


def test_an_arms_summary_names_its_best_run_and_aggregates_its_good_runs() -> None:
    def fig(label: str, every: float | None, a: float, b: float, **extra: Any) -> dict[str, Any]:
        tasks = {"a": {"final_normalised": a}, "b": {"final_normalised": b}}
        mean = (a + b) / 2
        return {
            "label": label,
            "tasks": tasks,
            "seconds_to_every_target": every,
            "final_mean": mean,
            "final_iqm": mean,
            **extra,
        }

    runs = [
        fig("seed 0", 300.0, 1.0, 1.0),
        fig("seed 1", 120.0, 0.5, 0.7),
        fig("seed 2", None, 0.2, 0.4),
        fig("seed 3", 50.0, 9.0, 9.0, error="crashed"),
    ]
    out = af.arm_summary([A, B], runs, reps=200)
    assert out["best"] == 1 and out["best_label"] == "seed 1"
    assert out["best_seconds_to_every_target"] == 120.0
    assert out["best_final_iqm"] == pytest.approx(0.6)
    assert out["reached_every_target"] == 2 and out["runs"] == 4
    assert out["final"]["runs"] == 3  # the crashed run is left out
    assert out["final"]["mean"]["point"] == pytest.approx((2.0 + 1.2 + 0.6) / 6)


def test_the_clock_stamps_each_record_when_first_read_and_waits_for_a_whole_line(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "runs" / "q__0__x"
    run_dir.mkdir(parents=True)
    path = run_dir / "metrics.jsonl"
    t0 = time.perf_counter()
    clock = af.RecordClock(tmp_path / "runs", "*/metrics.jsonl", t0)
    path.write_text(json.dumps({"charts/env_steps": 1}) + "\n" + '{"charts/env_')
    clock.sweep()
    time.sleep(0.05)
    with path.open("a") as f:
        f.write('steps": 2}\nnot json\n')
    clock.sweep()
    ((records, stamps),) = clock.runs().values()
    assert [r["charts/env_steps"] for r in records] == [1, 2]  # the torn line read whole
    assert stamps[1] > stamps[0] >= 0
    assert list(clock.runs()) == [run_dir]
    clock.save(tmp_path / "clock.json")
    assert json.loads((tmp_path / "clock.json").read_text()) == {str(path): stamps}
