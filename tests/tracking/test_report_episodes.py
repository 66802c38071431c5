"""`mtrl report` draws return curves from every episode (episodes.csv) when a run kept them."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mtrl.cli import main
from mtrl.tracking.episodes import FILENAME, EpisodeCsvSink
from mtrl.tracking.report import Plotter
from mtrl.tracking.report_episodes import WINDOW, rolling_mean, spread
from mtrl.tracking.report_summary import format_return
from mtrl.train.progress import RECENT_EPISODES


def _capture(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[dict[str, Any]]]:
    """Each saved figure's panels: title, x label, every line's x and y, texts, legend."""
    kept: dict[str, list[dict[str, Any]]] = {}
    finish = Plotter.finish

    def keep(self: Plotter, fig: Any, axes: Any, name: str, *args: Any, **kw: Any) -> None:
        kept[name] = [
            {
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "lines": [
                    (np.asarray(ln.get_xdata()), np.asarray(ln.get_ydata()), ln.get_linestyle())
                    for ln in ax.get_lines()
                ],
                "texts": [t.get_text() for t in ax.texts],
            }
            for ax in axes
        ]
        finish(self, fig, axes, name, *args, **kw)

    monkeypatch.setattr(Plotter, "finish", keep)
    return kept


def _run(tmp_path: Path, returns: list[float], per_unroll: int = 4) -> Path:
    """A run of tasks ``a`` and ``b``: six metric snapshots of both, and every episode of
    ``a`` (``per_unroll`` per unroll of 100 steps) through the real sink; ``b`` kept none."""
    run = tmp_path / "run"
    run.mkdir(parents=True)
    sink = EpisodeCsvSink(run / FILENAME)
    recent: deque[float] = deque(maxlen=RECENT_EPISODES)
    records = []
    for u in range(0, len(returns), per_unroll):
        chunk = returns[u : u + per_unroll]
        steps = 100 * (u // per_unroll + 1)
        sink.add_episodes("a", steps, chunk, [10] * len(chunk), steps / 200)
        recent.extend(chunk)
        if u % (per_unroll * 5) == 0:  # a snapshot now and then, as the trainer logs them
            records.append(
                {
                    "charts/env_steps": 2 * steps,
                    "charts/elapsed_s": steps / 200,
                    "task/a/env_steps": steps,
                    "task/a/return": float(np.mean(recent)),
                    "task/b/env_steps": steps,
                    "task/b/return": 1.0,
                }
            )
            sink.write(records[-1])
    sink.close()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


def test_return_curves_have_a_point_per_episode_and_the_metrics_rolling_mean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = _capture(monkeypatch)
    rng = np.random.default_rng(0)
    returns = [round(float(v), 3) for v in rng.normal(size=103).cumsum()]  # 7 digits kept
    run = _run(tmp_path, returns)
    assert main(["report", str(run)]) == 0
    for name in ("return_vs_steps.png", "return_vs_time.png"):
        a, b = kept[name]
        assert a["title"] == "a" and b["title"] == "b"
        (dots_x, dots_y, dots_style), (mean_x, mean_y, mean_style) = a["lines"]
        assert dots_style == "None" and mean_style == "-" and np.array_equal(mean_x, dots_x)
        assert len(dots_y) == len(returns) and dots_y.tolist() == returns
        assert np.all(np.diff(dots_x) > 0)  # an unroll's episodes spread, not stacked
        # The line is the trainer's task/a/return (mean of its last 20 episodes) at every one.
        trainer = [np.mean(returns[max(0, i + 1 - RECENT_EPISODES) : i + 1]) for i in range(103)]
        np.testing.assert_allclose(mean_y, trainer)
        assert a["texts"] == [format_return(trainer[-1])]
        (snapshot,) = b["lines"]  # b kept no episodes: its snapshot curve, as for old runs
        assert len(snapshot[0]) == 6
    a_steps = kept["return_vs_steps.png"][0]
    assert a_steps["lines"][0][0][-1] == 100 * 26  # the last unroll's steps
    assert a_steps["xlabel"] == "env steps of this task"
    a_time = kept["return_vs_time.png"][0]
    assert a_time["lines"][0][0][-1] == 2600 / 200  # the run's seconds at the last unroll


def test_a_run_without_episodes_keeps_its_snapshot_curves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = _capture(monkeypatch)
    run = _run(tmp_path, [1.0] * 40)
    (run / FILENAME).unlink()
    assert main(["report", str(run)]) == 0
    a, _ = kept["return_vs_steps.png"]
    (curve,) = a["lines"]
    assert curve[0].tolist() == [100, 600]


def test_overlaid_runs_each_draw_their_episodes(tmp_path: Path) -> None:
    one = _run(tmp_path / "1", [1.0, 2.0, 3.0] * 20)
    two = _run(tmp_path / "2", [5.0] * 30)
    assert main(["report", str(one), str(two), "-o", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "return_vs_steps.png").is_file()


def test_many_episodes_thin_the_dots_but_not_the_mean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = _capture(monkeypatch)
    monkeypatch.setattr("mtrl.tracking.report_episodes.MAX_DOTS", 50)
    returns = [float(i % 7) for i in range(400)]
    assert main(["report", str(_run(tmp_path, returns))]) == 0
    (dots_x, dots_y, _), (_, mean_y, _) = kept["return_vs_steps.png"][0]["lines"]
    assert len(dots_y) == 50 and dots_x[-1] == 100 * 100
    assert len(mean_y) == 200  # four times the dots at most
    assert mean_y[-1] == pytest.approx(np.mean(returns[-WINDOW:]))


def test_the_window_is_the_metrics_and_the_helpers_compute_what_they_say() -> None:
    assert WINDOW == RECENT_EPISODES
    np.testing.assert_allclose(rolling_mean(np.arange(5.0), 2), [0, 0.5, 1.5, 2.5, 3.5])
    np.testing.assert_allclose(
        spread(np.array([10, 10, 20, 20, 20, 50])), [5, 10, 40 / 3, 50 / 3, 20, 50]
    )
    assert len(spread(np.array([]))) == 0
