"""Return curves of ``mtrl report`` drawn from every episode (a run's ``episodes.csv``).

Each episode is a faint dot in the run's colour; a line through them is the mean of the last
:data:`WINDOW` episodes — the same window as the trainer's ``task/<id>/return``, so the line
ends where the metric does, but it moves with every episode instead of every log record. Runs
older than ``episodes.csv`` keep the snapshot curves of :mod:`mtrl.tracking.report`.

The file gives each episode the task's env steps (and wall seconds) when the unroll in which it
ended was counted, so the episodes of one unroll share them; drawn so, they stack in columns.
:func:`spread` places them evenly over the stretch since the previous unroll, in the order they
were counted: each is off by less than one unroll, and the curve reads as one line.

Drawing only: the plotter (:mod:`mtrl.tracking.report_plot`) decides where and in which colour.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mtrl.tracking.episodes import Episodes

WINDOW = 20
"""Episodes in the rolling mean (``mtrl.train.progress.RECENT_EPISODES``, the metric's window)."""
MAX_DOTS = 5000
"""Dots drawn per curve at most (evenly spaced); the mean always uses every episode."""


def rolling_mean(y: np.ndarray, window: int = WINDOW) -> np.ndarray:
    """Mean of the last ``window`` values at each point (fewer at the start)."""
    y = np.asarray(y, dtype=np.float64)
    c = np.concatenate(([0.0], np.cumsum(y)))
    i = np.arange(1, len(y) + 1)
    lo = np.maximum(i - window, 0)
    return (c[i] - c[lo]) / (i - lo)


def spread(x: np.ndarray) -> np.ndarray:
    """Runs of equal values of a non-decreasing ``x`` spread evenly over the stretch since the
    previous value (0 before the first), each run ending at its value: 10, 10, 20, 20 → 5, 10,
    15, 20."""
    x = np.asarray(x, dtype=np.float64)
    if not len(x):
        return x
    starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
    sizes = np.diff(np.r_[starts, len(x)])
    prev = np.r_[min(0.0, x[0]), x[starts[:-1]]]
    j = np.arange(len(x)) - np.repeat(starts, sizes)  # place within its run
    lo, size = np.repeat(prev, sizes), np.repeat(sizes, sizes)
    return lo + (x - lo) * (j + 1) / size


def thin(n: int, limit: int) -> np.ndarray | slice:
    """Indices of at most ``limit`` of ``n`` points, evenly spread, first and last included."""
    if n <= limit:
        return slice(None)
    return np.unique(np.linspace(0, n - 1, limit).round().astype(int))


def draw_episodes(ax: Any, ep: Episodes, x: np.ndarray, colour: Any) -> np.ndarray:
    """Dots for ``ep``'s returns at ``x`` (its steps or seconds, :func:`spread`) and their
    rolling mean as a line, in ``colour``; returns the rolling mean (its end gets a label)."""
    mean = rolling_mean(ep.returns)
    dots = thin(len(ep), MAX_DOTS)
    ax.plot(x[dots], ep.returns[dots], ls="", marker=".", ms=4, mew=0, alpha=0.3, color=colour)
    line = thin(len(ep), 4 * MAX_DOTS)
    ax.plot(x[line], mean[line], color=colour, lw=1.6)
    return mean


def legend(line2d: Any) -> list[Any]:
    """Legend entries (made with matplotlib's ``Line2D``) that say what dots and lines are."""
    return [
        line2d([], [], ls="", marker=".", color="grey", alpha=0.5, label="one episode"),
        line2d([], [], color="grey", lw=1.6, label=f"mean of the last {WINDOW} episodes"),
    ]
