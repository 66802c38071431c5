"""The plotter of ``mtrl report``: one colour per run, a panel per task or metric, legends.

Per-task curves use the task's own env steps (``task/<task>/env_steps``: tasks get different
shares of a run's steps, so the run's total would stretch a task's curve) when a run logged
them, else the run's total. Return curves come from every episode when the run kept them
(:mod:`mtrl.tracking.report_episodes`), else from the metric snapshots; a task's
``target_score`` (from each run's config) is a dashed line across its return panel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mtrl.errors import UserError
from mtrl.tracking.report_data import ELAPSED, STEPS, RunData
from mtrl.tracking.report_episodes import draw_episodes, legend, spread
from mtrl.tracking.report_summary import RETURN, format_return

TARGET_STYLE = {"color": "grey", "linestyle": "--", "linewidth": 1.0, "alpha": 0.8}
"""How a task's ``target_score`` is drawn across its return panel."""


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
        per_episode = spec.per_task == RETURN  # from episodes.csv where a run has it
        panels = [
            p
            for p in panels
            if any(r.has(p[1]) or (per_episode and p[2] in r.episodes) for r in self.runs)
        ]
        if not panels:
            return
        fig, axes = self.grid(len(panels))
        drew_episodes = drew_target = False
        for ax, (panel_title, key, task) in zip(axes, panels, strict=True):
            for run in self.runs:
                if per_episode and self.draw_episodes(ax, run, task, spec.x):
                    drew_episodes = True
                    continue
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
            if spec.per_task == RETURN and task is not None:
                drew_target |= self.draw_targets(ax, task)
            ax.set_title(panel_title, fontsize="medium")
            ax.set_ylabel(spec.ylabel)
            if spec.log_y:
                self.log_y(ax)
            if spec.steps:  # counts: whole numbers from zero
                ax.yaxis.set_major_locator(self.ticker.MaxNLocator(integer=True))
                ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], 1) + 0.5)
            self.xlabel(ax, spec.x, [task] if task else [])
        legends = None
        keys = legend(self.plt.Line2D) if drew_episodes else []
        if drew_target:
            keys.append(self.plt.Line2D([], [], **TARGET_STYLE, label="target score"))
        if keys:  # what dots and lines are, then the runs when there are several
            runs = [self.run_handle(r) for r in self.runs] if len(self.runs) > 1 else []
            legends = [keys] + ([runs] if runs else [])
        self.finish(fig, axes, spec.name, spec.title, legends)

    def draw_targets(self, ax: Any, task: str) -> bool:
        """A dashed line at each distinct ``target_score`` the runs' configs give ``task``;
        False when none gives one."""
        targets = sorted({r.targets[task] for r in self.runs if task in r.targets})
        for target in targets:
            ax.axhline(target, **TARGET_STYLE)
        return bool(targets)

    def draw_episodes(self, ax: Any, run: RunData, task: str | None, x_key: str) -> bool:
        """``task``'s return of ``run`` from every episode (dots, rolling mean); False when
        the run kept no episodes of it (the caller draws its snapshot curve)."""
        ep = run.episodes.get(task) if task is not None else None
        if ep is None or not len(ep):
            return False
        x = spread(ep.wall_s / self.time_div if x_key == ELAPSED else ep.env_steps)
        mean = draw_episodes(ax, ep, x, self.colour[id(run)])
        self.label_last(ax, run, x, mean)
        return True


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
