"""The learning benchmark's curves (``benchmarks/learning.py``): every seed's curve of a task
on a common grid of its env steps, their mean with a 95% bootstrap band (rliable), and the
PNG with one panel per task."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from learning_stats import Curve, bootstrap


def common_grid(curves: Sequence[Curve], points: int = 100) -> np.ndarray:
    """Env steps that every curve covers: from the latest first point to the earliest last
    point (no extrapolation); empty when they do not overlap."""
    curves = [c for c in curves if len(c)]
    if not curves:
        return np.empty(0)
    lo = max(float(c.steps[0]) for c in curves)
    hi = min(float(c.steps[-1]) for c in curves)
    if hi < lo:
        return np.empty(0)
    return np.linspace(lo, hi, points) if hi > lo else np.array([lo])


def on_grid(curves: Sequence[Curve], grid: np.ndarray) -> np.ndarray:
    """A (curves x grid) matrix: each curve's return linearly interpolated at ``grid``."""
    return np.stack([np.interp(grid, c.steps, c.returns) for c in curves])


def mean_band(matrix: np.ndarray, reps: int = 2_000, seed: int = 0) -> dict[str, np.ndarray]:
    """Mean across the rows (seeds) of a (seeds x grid) matrix, per column, with a 95%
    bootstrap band (rliable)."""
    points, cis = bootstrap(matrix, lambda x: np.mean(x, axis=0), reps, seed)
    return {"mean": points, "ci_low": cis[0], "ci_high": cis[1]}


@dataclass
class Panel:
    """One task's plot: its seeds' curves, the band on the grid, and its target."""

    task: str
    curves: list[Curve]
    grid: np.ndarray
    band: dict[str, np.ndarray] | None
    target: float | None


def task_panel(
    task: str, curves: Sequence[Curve], target: float | None, reps: int, seed: int
) -> Panel:
    """The curves of ``task`` over its seeds on a common grid, with a mean and 95% band."""
    kept = [c for c in curves if len(c)]
    grid = common_grid(kept)
    band = mean_band(on_grid(kept, grid), reps, seed) if len(grid) else None
    return Panel(task, kept, grid, band, target)


def plot_panels(panels: Sequence[Panel], path: Path, title: str) -> Path:
    """One panel per task (return against the task's env steps): every seed faint, the mean
    across seeds with its 95% band, the target dashed. Writes the PNG ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, max(1, len(panels)))
    rows = math.ceil(len(panels) / cols) if panels else 1
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax, p in zip(axes.flat, panels, strict=False):
        for c in p.curves:
            ax.plot(c.steps, c.returns, color="0.6", alpha=0.6, lw=0.7)
        if p.band is not None:
            ax.plot(p.grid, p.band["mean"], color="C0", lw=2, label=f"mean of {len(p.curves)}")
            ax.fill_between(
                p.grid, p.band["ci_low"], p.band["ci_high"], color="C0", alpha=0.3, label="95% CI"
            )
        if p.target is not None:
            ax.axhline(p.target, color="k", ls="--", lw=1, label="target")
        ax.set_title(p.task, fontsize=10)
        ax.set_xlabel("task env steps")
        ax.set_ylabel("return (last 20 episodes)")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
