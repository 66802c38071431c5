"""``mtrl report``: PNG figures from the ``metrics.jsonl`` of one or several run directories.

Figures (each written only when some run has the metrics it shows): per-task return and
normalised score against env steps and against wall time, throughput over time, actors per
task over time, policy lag, PopArt σ per task and the losses. Several runs are overlaid, one
colour per run, with a shared legend, for comparing seeds or settings. The learner's per-task
diagnostics share one page, ``diagnostics.png`` (:mod:`mtrl.tracking.report_diagnostics`).

Per-task curves use the task's own env steps (``task/<task>/env_steps``: tasks get different
shares of a run's steps, so the run's total would stretch a task's curve) when a run logged
them, else the run's total. Returns and scores are written with 3 significant digits (0.955,
not 1.0; 475, not 475.0), at the end of each curve and in one line per run for the terminal.

A resumed run appends to its ``metrics.jsonl`` from the checkpoint's step, so records logged
after that checkpoint but before the crash appear twice; :func:`load_run` keeps the
continuation and drops the abandoned stretch, so curves go on where they stopped.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from mtrl.errors import UserError
from mtrl.tracking.report_summary import (
    RETURN,
    SCORE,
    format_return,
    last_returns,
    unscored_tasks,
)

STEPS = "charts/env_steps"
TASK_STEPS = "task/{task}/env_steps"
ELAPSED = "charts/elapsed_s"
LOSSES = ("losses/total", "losses/policy", "losses/value", "losses/entropy", "losses/grad_norm")


@dataclass
class RunData:
    """The records of one run, in order, and its task names."""

    path: Path
    records: list[dict[str, Any]]
    tasks: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.path.name

    def series(self, key: str, x: str = STEPS) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of the records that have a finite ``key`` and ``x``."""
        xs, ys = [], []
        for r in self.records:
            a, b = r.get(x), r.get(key)
            if _finite(a) and _finite(b):
                xs.append(float(a))
                ys.append(float(b))
        return np.asarray(xs), np.asarray(ys)

    def has(self, key: str) -> bool:
        return any(_finite(r.get(key)) for r in self.records)

    def task_x(self, task: str) -> str:
        """The x key of ``task``'s curves against steps: its own env steps when logged."""
        key = TASK_STEPS.format(task=task)
        return key if self.has(key) else STEPS

    def last(self, key: str) -> float | None:
        """The latest finite value of ``key``; None when it never had one."""
        for r in reversed(self.records):
            if _finite(r.get(key)):
                return float(r[key])
        return None


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _drop_abandoned(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """After a resume, env steps go back: drop the earlier records at or past that point."""
    out: list[dict[str, Any]] = []
    for r in records:
        steps = r.get(STEPS)
        if _finite(steps):
            while out and _finite(out[-1].get(STEPS)) and out[-1][STEPS] >= steps:
                out.pop()
        out.append(r)
    return out


def _task_names(run_dir: Path, records: list[dict[str, Any]]) -> list[str]:
    """Task names from config.yaml in config order, then any others the metrics mention."""
    names: list[str] = []
    cfg_path = run_dir / "config.yaml"
    if cfg_path.is_file():
        try:
            cfg = yaml.safe_load(cfg_path.read_text(encoding="utf-8")) or {}
            for t in cfg.get("tasks", []):
                names.append(t.get("name") or t["env"])
        except (yaml.YAMLError, AttributeError, KeyError, TypeError):
            warnings.warn(f"{cfg_path}: unreadable; task names come from the metrics", stacklevel=2)
    for r in records:
        for key in r:
            for prefix in ("task/", "popart/", "scheduler/", "learner/"):
                if key.startswith(prefix) and key.count("/") >= 2:
                    name = key[len(prefix) : key.rindex("/")]
                    # not a task: the "<task>/faults" of task/<task>/faults/raise
                    nested = any(name.startswith(f"{n}/") for n in names)
                    if name not in names and not nested:
                        names.append(name)
    return names


def load_run(run_dir: Path | str) -> RunData:
    """Read a run directory's metrics (a truncated last line, from a crash, is skipped)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run directory")
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise UserError(f"{run_dir}: no metrics.jsonl here; is it a run directory?")
    records, bad = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(rec, dict):
            records.append(rec)
    if bad:
        warnings.warn(f"{path}: skipped {bad} unreadable line(s)", stacklevel=2)
    records = _drop_abandoned(records)
    return RunData(run_dir, records, _task_names(run_dir, records))


# -- figures ---------------------------------------------------------------------------------


def _time_axis(runs: Sequence[RunData]) -> tuple[float, str]:
    """Divisor and label so wall-time axes read in s, min or h."""
    longest = max(
        (float(run.series(ELAPSED, ELAPSED)[0].max(initial=0)) for run in runs), default=0
    )
    if longest > 2 * 3600:
        return 3600.0, "wall time (h)"
    if longest > 120:
        return 60.0, "wall time (min)"
    return 1.0, "wall time (s)"


class Plotter:
    """Draws into ``out``; one colour per run, consistent across figures."""

    def __init__(self, runs: Sequence[RunData], out: Path) -> None:
        try:
            import matplotlib
        except ImportError:
            raise UserError("mtrl report needs matplotlib: pip install matplotlib") from None

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
        from matplotlib import ticker

        self.plt, self.ticker, self.eng = plt, ticker, ticker.EngFormatter(sep="")
        self.runs, self.out = list(runs), out
        cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        self.colour = {id(r): cycle[i % len(cycle)] for i, r in enumerate(self.runs)}
        self.time_div, self.time_label = _time_axis(self.runs)
        self.tasks: list[str] = []
        for run in self.runs:
            self.tasks += [t for t in run.tasks if t not in self.tasks]
        self.written: list[Path] = []

    def _x(self, x: np.ndarray, key: str) -> np.ndarray:
        return x / self.time_div if key == ELAPSED else x

    def finish(
        self,
        fig: Any,
        axes: Sequence[Any],
        name: str,
        title: str,
        legends: Sequence[list[Any]] | None = None,
    ) -> None:
        """Grid, title, legends under the panels (each list of handles its own block, one under
        the other; by default one line per run when there are several), and save. The saved
        image grows to fit the legends: a long run name is never clipped."""
        if legends is None:
            legends = [[self.run_handle(r) for r in self.runs]] if len(self.runs) > 1 else []
        for ax in axes:
            ax.grid(True, alpha=0.3)
        fig.suptitle(title if len(self.runs) > 1 else f"{title} — {self.runs[0].label}")
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.15 / fig.get_figheight()))  # room for the title
        top = 0.0  # figure fraction where the next legend hangs from
        for handles in legends:
            legend = fig.legend(
                handles=handles,
                loc="upper center",
                bbox_to_anchor=(0.5, top),
                ncol=min(len(handles), 3 if len(axes) < 3 else 4),
                fontsize="small",
                frameon=False,
            )
            box = legend.get_window_extent(fig.canvas.get_renderer())
            top = fig.transFigure.inverted().transform((0, box.y0))[1]
        path = self.out / name
        fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.15)
        self.plt.close(fig)
        self.written.append(path)

    def run_handle(self, run: RunData, **style: Any) -> Any:
        """A legend entry for ``run`` (its colour unless ``style`` says otherwise)."""
        return self.plt.Line2D([], [], **{"color": self.colour[id(run)], **style}, label=run.label)

    def grid(self, n: int) -> tuple[Any, list[Any]]:
        cols = min(3, n)
        rows = math.ceil(n / cols)
        fig, axs = self.plt.subplots(
            rows, cols, figsize=(5.2 * cols, 3.6 * rows + 0.6), squeeze=False
        )
        flat = list(axs.flat)
        for ax in flat[n:]:
            ax.set_visible(False)
        return fig, flat[:n]

    def log_y(self, ax: Any) -> None:
        """Log scale with plain tick labels, only when the data spans a wide range."""
        lo, hi = ax.dataLim.y0, ax.dataLim.y1
        if lo > 0 and hi / lo > 20:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(self.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(self.ticker.NullFormatter())

    def xlabel(self, ax: Any, x_key: str, tasks: Sequence[str] = ()) -> None:
        """Wall time, or env steps: each curve's task's own when every run logged them."""
        if x_key == ELAPSED:
            ax.set_xlabel(self.time_label)
            return
        if not tasks:
            ax.set_xlabel("env steps")
        elif all(run.task_x(t) != STEPS for run in self.runs for t in tasks):
            ax.set_xlabel("env steps of this task" if len(tasks) == 1 else "env steps of each task")
        else:
            ax.set_xlabel("env steps (all tasks)")
        ax.xaxis.set_major_formatter(self.eng)

    def x_key(self, run: RunData, x_key: str, task: str | None) -> str:
        """The key ``run``'s curve of ``task`` uses for ``x_key``: per-task steps if it has them."""
        return run.task_x(task) if task is not None and x_key == STEPS else x_key

    def label_last(self, ax: Any, run: RunData, x: np.ndarray, y: np.ndarray) -> None:
        """Write the curve's last value at its end, in the run's colour."""
        ax.annotate(
            format_return(float(y[-1])),
            (x[-1], y[-1]),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize="x-small",
            color=self.colour[id(run)],
        )

    def draw(self, spec: Figure) -> None:
        """Draw ``spec`` if any run has its metrics; skip it silently otherwise."""
        panels: list[tuple[str, str, str | None]]  # (title, metric, task)
        if spec.per_task is not None:
            panels = [(t, spec.per_task.format(task=t), t) for t in self.tasks]
        else:
            panels = [(k, k, None) for k in spec.keys]
        panels = [p for p in panels if any(r.has(p[1]) for r in self.runs)]
        if not panels:
            return
        fig, axes = self.grid(len(panels))
        for ax, (panel_title, key, task) in zip(axes, panels, strict=True):
            for run in self.runs:
                x, y = run.series(key, self.x_key(run, spec.x, task))
                if len(x):
                    ax.plot(
                        self._x(x, spec.x),
                        y,
                        color=self.colour[id(run)],
                        drawstyle="steps-post" if spec.steps else "default",
                        marker="." if len(x) < 30 else None,
                    )
                    if spec.label_last:
                        self.label_last(ax, run, self._x(x, spec.x), y)
            ax.set_title(panel_title, fontsize="medium")
            ax.set_ylabel(spec.ylabel)
            if spec.log_y:
                self.log_y(ax)
            if spec.steps:  # counts: whole numbers from zero
                ax.yaxis.set_major_locator(self.ticker.MaxNLocator(integer=True))
                ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], 1) + 0.5)
            self.xlabel(ax, spec.x, [task] if task else [])
        self.finish(fig, axes, spec.name, spec.title)


@dataclass(frozen=True)
class Figure:
    """One PNG: a panel per task (``per_task`` names the metric with ``{task}``) or a panel per
    global metric in ``keys``."""

    name: str
    title: str
    x: str
    per_task: str | None = None
    keys: tuple[str, ...] = ()
    ylabel: str = ""
    log_y: bool = False
    steps: bool = False  # draw as a step function (counts that change at decisions)
    label_last: bool = False  # write each curve's last value at its end (returns, scores)


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
    from mtrl.tracking.report_diagnostics import draw_diagnostics  # it imports this module

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
