"""``diagnostics.png`` of ``mtrl report``: the learner's per-task diagnostics on one page.

One panel per figure the learner logs as ``learner/<task>/<figure>`` (defined in
``mtrl.algorithms.impala.diagnostics``) plus PopArt μ; only panels for which some run has data. Each
panel overlays every task, one colour per task, one line style per run when several are compared, so
a task whose policy collapses, whose importance ratios run away or whose value stops explaining its
returns stands out against the others. Each task's curve runs over its own env steps when the run
logged them (as in the report's other per-task figures), so tasks are compared at the same amount of
their own experience. Each panel's title names its unit; docs/REPORT.md says what each shows and
what healthy and worrying curves look like (a test keeps the two in step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mtrl.tracking.report_data import STEPS, RunData
from mtrl.tracking.report_plot import Plotter

NAME = "diagnostics.png"
TITLE = "Learner diagnostics per task (each panel: docs/REPORT.md)"
LINESTYLES = ("-", "--", ":", "-.")


@dataclass(frozen=True)
class Panel:
    """One panel: the metric (``{task}`` is replaced by each task's name) and what it shows."""

    key: str
    title: str
    log_y: bool = False  # log scale when the data is positive and spans a wide range
    fraction: bool = False  # a share in [0, 1]: the whole range, comparable across runs
    ref: float | None = None  # a faint horizontal line at the value of a healthy run


#: The panels of ``diagnostics.png``, in order.
PANELS: tuple[Panel, ...] = (
    Panel("learner/{task}/entropy", "policy entropy (nats)"),
    Panel(
        "learner/{task}/entropy_boost",
        "entropy bonus multiplier, floor/ceiling (×)",
        log_y=True,
        ref=1.0,
    ),
    Panel("learner/{task}/kl", "KL(behaviour ‖ learner) (nats per step)", log_y=True),
    Panel("learner/{task}/rho", "mean importance ratio ρ = π/μ (ratio, 1 = on-policy)", ref=1.0),
    Panel("learner/{task}/rho_clipped", "steps with ρ clipped at ρ̄ (fraction)", fraction=True),
    Panel("learner/{task}/adv_abs", "mean |advantage| (returns / value scale)"),
    Panel("learner/{task}/value_error", "value MSE (units of PopArt σ²)", log_y=True),
    Panel("learner/{task}/value_ev", "value explained variance (share, 1 = exact)", ref=1.0),
    Panel(
        "learner/{task}/torso_grad_share", "share of torso gradient norm (fraction)", fraction=True
    ),
    Panel("learner/{task}/log_std", "Gaussian log σ, mean over dims (ln of pre-tanh units)"),
    Panel("learner/{task}/saturated", "action dims with |mean| > 2 (fraction)", fraction=True),
    Panel("popart/{task}/mu", "PopArt μ, mean value target (return units)"),
    Panel("popart/{task}/value_scale", "value scale: σ, slow to fall (return units)", log_y=True),
)


def present(runs: Sequence[RunData], tasks: Sequence[str]) -> tuple[list[str], list[Panel]]:
    """The tasks with some diagnostic and the panels with data for some task, in order."""

    def some(key: str) -> bool:
        return any(r.has(key) for r in runs)

    tasks = [t for t in tasks if any(some(p.key.format(task=t)) for p in PANELS)]
    return tasks, [p for p in PANELS if any(some(p.key.format(task=t)) for t in tasks)]


def draw_diagnostics(plot: Plotter) -> None:
    """Write ``diagnostics.png`` with ``plot`` if any run has a diagnostic; skip it otherwise."""
    runs = plot.runs
    tasks, panels = present(runs, plot.tasks)
    if not panels:
        return
    cmap = plot.plt.get_cmap("tab10" if len(tasks) <= 10 else "tab20")
    colour = {t: cmap(i % cmap.N) for i, t in enumerate(tasks)}
    style = {id(r): LINESTYLES[i % len(LINESTYLES)] for i, r in enumerate(runs)}
    fig, axes = plot.grid(len(panels))
    for ax, panel in zip(axes, panels, strict=True):
        for run in runs:
            for task in tasks:
                x, y = run.series(panel.key.format(task=task), plot.x_key(run, STEPS, task))
                if len(x):
                    ax.plot(
                        x,
                        y,
                        color=colour[task],
                        linestyle=style[id(run)],
                        marker="." if len(x) < 30 else None,
                        markersize=4,
                    )
        if panel.ref is not None:
            ax.axhline(panel.ref, color="grey", linewidth=0.8, alpha=0.6)
        ax.set_title(panel.title, fontsize="medium")
        ax.ticklabel_format(axis="y", useOffset=False)  # ρ near 1 reads 1.0002, not +1 2e-4
        if panel.fraction:
            ax.set_ylim(-0.03, 1.03)
        if panel.log_y:
            plot.log_y(ax)
        plot.xlabel(ax, STEPS, tasks)
    legends: list[list[Any]] = [
        [plot.plt.Line2D([], [], color=colour[t], label=t, marker="o") for t in tasks]
    ]
    if len(runs) > 1:
        legends.append([plot.run_handle(r, color="black", linestyle=style[id(r)]) for r in runs])
    plot.finish(fig, axes, NAME, TITLE, legends)
