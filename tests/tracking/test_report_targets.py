"""`mtrl report` draws each task's ``target_score`` (when its config sets one) as a dashed line
in the task's panel of the return figures, with a legend entry saying what the line is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mtrl.cli import main
from mtrl.config import ExperimentConfig
from mtrl.tracking import make_sinks
from mtrl.tracking.episodes import FILENAME, EpisodeCsvSink
from mtrl.tracking.report import Plotter
from mtrl.tracking.report_data import load_run
from mtrl.tracking.run_dir import create_run_dir

RETURN_FIGURES = ("return_vs_steps.png", "return_vs_time.png")


def _capture(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """Each saved figure's panels (title → its lines' y data and styles) and legend labels,
    read from the real axes just before the figure is saved."""
    kept: dict[str, dict[str, Any]] = {}
    finish = Plotter.finish

    def keep(self: Plotter, fig: Any, axes: Any, name: str, *args: Any, **kw: Any) -> None:
        finish(self, fig, axes, name, *args, **kw)  # legends are added here
        kept[name] = {
            "panels": {
                ax.get_title(): [
                    (np.asarray(ln.get_ydata(), dtype=float), ln.get_linestyle())
                    for ln in ax.get_lines()
                ]
                for ax in axes
            },
            "legend": [t.get_text() for lg in fig.legends for t in lg.get_texts()],
        }

    monkeypatch.setattr(Plotter, "finish", keep)
    return kept


def _run(parent: Path, seed: int, cartpole_target: float | None) -> Path:
    """Two tasks through the real sinks: ``cartpole`` (target ``cartpole_target``) with every
    episode kept, ``pong`` without a target and with its snapshot curve only."""
    cartpole: dict[str, Any] = {"env": "gymnasium/CartPole-v1", "name": "cartpole"}
    if cartpole_target is not None:
        cartpole["target_score"] = cartpole_target
    cfg = ExperimentConfig.model_validate(
        {
            "name": "tgt",
            "seed": seed,
            "tasks": [cartpole, {"env": "envpool/Pong-v5", "name": "pong"}],
            "tracking": {"console": "quiet", "wandb": {"mode": "disabled"}},
        }
    )
    run = create_run_dir(parent, cfg.name, seed, cfg.model_dump(mode="json"))
    sinks = make_sinks(cfg, run, ["cartpole", "pong"])
    episodes = EpisodeCsvSink(run / FILENAME)
    for i in range(1, 8):
        episodes.add_episodes("cartpole", 1000 * i, [50.0 * i, 60.0 * i], [10, 10], float(i))
        sinks.write(
            {
                "charts/env_steps": 2000 * i,
                "charts/elapsed_s": float(i),
                "task/cartpole/env_steps": 1000 * i,
                "task/cartpole/return": 55.0 * i,
                "task/pong/env_steps": 1000 * i,
                "task/pong/return": -21.0 + i,
            }
        )
    episodes.close()
    sinks.close()
    return run


def _dashed_at(lines: list[tuple[np.ndarray, str]], y: float) -> bool:
    return any(style == "--" and len(v) and np.all(v == y) for v, style in lines)


def test_the_target_score_is_a_dashed_line_in_its_tasks_panel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = _capture(monkeypatch)
    run = _run(tmp_path, 0, cartpole_target=475)
    assert load_run(run).targets == {"cartpole": 475.0}
    assert main(["report", str(run)]) == 0
    for name in RETURN_FIGURES:
        panels = kept[name]["panels"]
        assert _dashed_at(panels["cartpole"], 475.0), (name, panels["cartpole"])
        assert not any(style == "--" for _, style in panels["pong"]), name  # it has no target
        assert "target score" in kept[name]["legend"], kept[name]["legend"]


def test_without_targets_no_line_and_no_legend_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = _capture(monkeypatch)
    run = _run(tmp_path, 0, cartpole_target=None)
    assert main(["report", str(run)]) == 0
    for name in RETURN_FIGURES:
        assert not any(s == "--" for ls in kept[name]["panels"].values() for _, s in ls)
        assert "target score" not in kept[name]["legend"]


def test_overlaid_runs_draw_each_distinct_target_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = _capture(monkeypatch)
    a, b, c = (_run(tmp_path, s, t) for s, t in ((0, 475), (1, 475), (2, 200)))
    assert main(["report", str(a), str(b), str(c), "-o", str(tmp_path / "o")]) == 0
    cartpole = kept["return_vs_steps.png"]["panels"]["cartpole"]
    dashed = sorted(float(v[0]) for v, style in cartpole if style == "--")
    assert dashed == [200.0, 475.0]
