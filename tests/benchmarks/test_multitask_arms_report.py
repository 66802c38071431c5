"""The arms report of the multi-task benchmark (benchmarks/multitask_arms_report.py) on
hand-made result files: time to every target, the tasks alone summed, seeds pooled across
files, and the figures of an arm that missed a target on one seed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import multitask_arms_report as rep  # noqa: E402

RANDOMS = {"a": 0.0, "b": -100.0}


def run(a: tuple[float | None, float], b: tuple[float | None, float]) -> dict[str, Any]:
    """A run's record: per task (seconds to target or None, final mean return)."""
    tasks = {}
    for env, (at, final), target in (("a", a, 10.0), ("b", b, 0.0)):
        tasks[env] = {
            "target": target,
            "reached": at is not None,
            "final_mean_return": final,
            **({"wall_s": at} if at is not None else {}),
        }
    return {"tasks": tasks}


SOLO = {"a": run((5.0, 10.0), (None, -100.0)), "b": run((None, 10.0), (7.0, 0.0))}
SOLO["a"]["tasks"] = {"a": SOLO["a"]["tasks"]["a"]}
SOLO["b"]["tasks"] = {"b": SOLO["b"]["tasks"]["b"]}


def test_time_to_every_target_and_alone_summed() -> None:
    assert rep.every_target_s(run((3.0, 10.0), (9.0, 0.0))) == 9.0
    assert rep.every_target_s(run((3.0, 10.0), (None, -50.0))) is None
    assert rep.alone_sum_s(SOLO) == 12.0
    missed = {**SOLO, "b": run((None, 0.0), (None, -100.0))}
    missed["b"]["tasks"] = {"b": missed["b"]["tasks"]["b"]}
    assert rep.alone_sum_s(missed) is None


def test_an_arm_over_seeds_from_two_files() -> None:
    first = {"per_seed": [
        {"seed": 0, "joint": {"sum": run((3.0, 10.0), (None, -50.0))}, "solo": SOLO},
        {"seed": 1, "joint": {"sum": run((4.0, 12.0), (8.0, 0.0))}, "solo": SOLO},
    ]}  # fmt: skip
    second = {"per_seed": [
        {"seed": 0, "joint": {"turns": run((2.0, 10.0), (6.0, 5.0))}, "solo": SOLO},
    ]}  # fmt: skip
    seeds = rep.merge_seeds([first, second])
    assert sorted(seeds) == [0, 1] and set(seeds[0]["joint"]) == {"sum", "turns"}
    f = rep.arm_figures(seeds, "sum", RANDOMS)
    assert f["seeds"] == [0, 1]
    assert f["time_to_every_target_s"] == {0: None, 1: 8.0}
    assert f["reached"] == 1 and f["faster_than_alone"] == [1]  # 8 s against 5 + 7
    assert f["final_normalised"] == [[1.0, 0.5], [1.2, 1.0]]
    assert f["worst_final"] == 0.5
    assert f["final_iqm"]["ci_low"] <= f["final_iqm"]["point"] <= f["final_iqm"]["ci_high"]
    t = rep.arm_figures(seeds, "turns", RANDOMS)
    assert t["seeds"] == [0] and t["faster_than_alone"] == [0]
    assert t["final_normalised"] == [[1.0, pytest.approx(1.05)]]
    table = rep.table({"sum": f, "turns": t})
    assert "| `sum` | 2 | 1/2 | ✗, 8 | 1/2 |" in table
