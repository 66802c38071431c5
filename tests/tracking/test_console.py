"""Console progress views: rich live table, plain lines, JSON lines."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console

from mtrl.tracking.console import (
    JsonlConsole,
    PlainConsole,
    RateEstimator,
    RichProgress,
    format_duration,
)

TASKS = ["gymnasium/CartPole-v1", "minatar/breakout"]


def _record(steps: int, elapsed: float, faults: int = 0) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "charts/env_steps": steps,
        "charts/elapsed_s": elapsed,
        "charts/sps": 1234.5,
        "charts/updates": 17,
        "charts/policy_lag": 1.25,
    }
    for k, name in enumerate(TASKS):
        rec[f"task/{name}/return"] = 100.0 + k
        rec[f"task/{name}/normalized_score"] = 0.5
        rec[f"task/{name}/episodes"] = 40
        rec[f"task/{name}/episode_length"] = 99.0
        rec[f"task/{name}/env_steps"] = steps // 2
        rec[f"scheduler/{name}/actors"] = 2 + k
    rec[f"task/{TASKS[1]}/faults"] = faults
    rec[f"task/{TASKS[1]}/quarantined"] = 0
    return rec


def test_rich_progress_renders_to_a_non_terminal() -> None:
    out = io.StringIO()
    view = RichProgress(
        TASKS, 10_000, title="demo", console=Console(file=out, force_terminal=False, width=160)
    )
    view.write(_record(1000, 10.0))
    view.write(_record(3000, 20.0, faults=2))
    view.close()
    text = out.getvalue()
    for needle in (*TASKS, "demo", "3,000 / 10,000 env steps (30.0%)", "101.0", "0.50"):
        assert needle in text, needle
    assert "ETA 0:00:35" in text  # 2,000 steps in 10 s → 7,000 left at 200/s
    assert "faults 2" in text
    snapshot = io.StringIO()
    Console(file=snapshot, width=160).print(view.render())
    assert "actors" in snapshot.getvalue() and "episodes" in snapshot.getvalue()


def test_rich_progress_handles_records_without_task_metrics() -> None:
    out = io.StringIO()
    view = RichProgress(TASKS, None, console=Console(file=out, force_terminal=False, width=120))
    view.write({"charts/env_steps": 0, "charts/sps": float("nan")})
    view.close()
    assert "0 env steps" in out.getvalue() and TASKS[0] in out.getvalue()


def test_plain_console_one_line_per_record() -> None:
    out = io.StringIO()
    view = PlainConsole(TASKS, out, total_env_steps=10_000)
    view.write(_record(1000, 10.0))
    view.write(_record(3000, 20.0, faults=3))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert "steps       3,000" in lines[1] and "ETA 0:00:35" in lines[1]
    assert "CartPole-v1    100.0" in lines[1] and "breakout    101.0 (3 faults)" in lines[1]


def test_jsonl_console_prints_parseable_records() -> None:
    out = io.StringIO()
    view = JsonlConsole(out)
    view.write(_record(5, 1.0))
    view.write(_record(6, 2.0))
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["charts/env_steps"] for r in rows] == [5, 6]


def test_eta_and_durations() -> None:
    rate = RateEstimator(total=1000)
    assert rate.eta(0) is None
    rate.update({"charts/env_steps": 100, "charts/elapsed_s": 1.0, "charts/sps": 0.5})
    assert rate.eta(100) is None  # the first record's rate includes start-up: no ETA yet
    rate.update({"charts/env_steps": 500, "charts/elapsed_s": 3.0})
    assert rate.rate == 200.0 and rate.eta(500) == 2.5
    assert format_duration(3725) == "1:02:05"
    assert format_duration(90000) == "1d 1:00:00"
    assert format_duration(None) == "-" and format_duration(float("nan")) == "-"


def test_plain_console_shows_a_task_without_steps_as_waiting_with_its_faults() -> None:
    out = io.StringIO()
    view = PlainConsole(TASKS, out, total_env_steps=10_000)
    record = _record(1000, 10.0)
    for key in [k for k in record if k.startswith(f"task/{TASKS[1]}/")]:
        del record[key]
    record[f"task/{TASKS[1]}/env_steps"] = 0
    record[f"task/{TASKS[1]}/faults"] = 4
    view.write(record)
    line = out.getvalue().splitlines()[0]
    assert "breakout waiting (4 faults)" in line and "ETA -" in line
