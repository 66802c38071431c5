"""``mtrl report``: PNG figures from the ``metrics.jsonl`` of one or several run directories.

Figures (each written only when some run has the metrics it shows): per-task return and
normalised score against env steps and against wall time, throughput over time, actors per
task over time, policy lag, PopArt σ per task and the losses. Several runs are overlaid, one
colour per run, with a shared legend, for comparing seeds or settings. The learner's per-task
diagnostics share one page, ``diagnostics.png`` (:mod:`mtrl.tracking.report_diagnostics`).

Return curves come from every episode when the run has an ``episodes.csv`` (a dot per episode
and a rolling mean, :mod:`mtrl.tracking.report_episodes`), else from the metric snapshots.
Per-task curves use the task's own env steps when a run logged them (:mod:`.report_plot`).
Returns and scores are written with 3 significant digits (0.955, not 1.0; 475, not 475.0), at
the end of each curve and in one line per run for the terminal. Reading a run, a resumed one
included: :mod:`mtrl.tracking.report_data`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from mtrl.errors import UserError
from mtrl.tracking.report_data import ELAPSED, STEPS, RunData, load_run
from mtrl.tracking.report_diagnostics import draw_diagnostics
from mtrl.tracking.report_plot import Figure, Plotter
from mtrl.tracking.report_summary import (
    RETURN,
    SCORE,
    last_returns,
    unscored_tasks,
)

__all__ = ["FIGURES", "Figure", "Plotter", "RunData", "default_out", "load_run", "write_report"]

LOSSES = ("losses/total", "losses/policy", "losses/value", "losses/entropy", "losses/grad_norm")
NORMALISED = "Normalised score (random = 0, reference = 1)"

#: Every figure ``mtrl report`` can write, in order.
FIGURES: tuple[Figure, ...] = (
    Figure("return_vs_steps.png", "Episode return", STEPS, RETURN, "return", label_last=True),
    Figure("return_vs_time.png", "Episode return", ELAPSED, RETURN, "return", label_last=True),
    Figure("normalized_score_vs_steps.png", NORMALISED, STEPS, SCORE, label_last=True),
    Figure("normalized_score_vs_time.png", NORMALISED, ELAPSED, SCORE, label_last=True),
    Figure("throughput.png", "Throughput (env steps / s)", ELAPSED, keys=("charts/sps",)),
    Figure(
        "actors.png", "Actors per task", ELAPSED, "scheduler/{task}/actors", "actors", steps=True
    ),
    Figure(
        "policy_lag.png",
        "Policy lag (learner versions behind the acting policy)",
        STEPS,
        keys=("charts/policy_lag", "charts/policy_lag_max"),
    ),
    Figure("popart_sigma.png", "PopArt scale σ", STEPS, "popart/{task}/sigma", "σ", log_y=True),
    Figure("losses.png", "Losses", STEPS, keys=LOSSES),
)


def default_out(run_dirs: Sequence[Path | str]) -> Path:
    """``RUN_DIR/plots`` for one run; ``./report`` for several."""
    return Path(run_dirs[0]) / "plots" if len(run_dirs) == 1 else Path("report")


def write_report(
    run_dirs: Sequence[Path | str],
    out: Path | str | None = None,
    note: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write the figures for ``run_dirs`` into ``out``; returns the PNG paths written.

    ``note`` receives lines for the terminal: each run's last mean return per task (3
    significant digits) and what the figures leave out (tasks without a normalised score).
    """
    if not run_dirs:
        raise UserError("give at least one run directory")
    runs = [load_run(d) for d in run_dirs]
    empty = [str(r.path) for r in runs if not r.records]
    if len(empty) == len(runs):
        raise UserError(f"no metrics recorded yet in {', '.join(empty)}")
    out = Path(out) if out is not None else default_out(run_dirs)
    figures = Plotter([r for r in runs if r.records], out)
    out.mkdir(parents=True, exist_ok=True)
    for spec in FIGURES:
        figures.draw(spec)
    draw_diagnostics(figures)
    if note is None:
        return figures.written
    for line in last_returns(figures.runs, figures.tasks):
        note(line)
    unscored = unscored_tasks(figures.runs, figures.tasks)
    if unscored:
        note(
            f"no normalised score (the env declares no random/reference score) for: "
            f"{', '.join(unscored)}; their raw returns are in return_vs_*.png"
        )
    return figures.written
