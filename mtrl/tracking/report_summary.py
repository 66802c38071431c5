"""What ``mtrl report`` tells the terminal besides its figures, and how it writes numbers.

Returns and normalised scores are written with 3 significant digits in plain notation, here and
at the ends of the report's curves: a return of 0.955 reads ``0.955``, not ``1.0``, and one of
474.96 reads ``475``. Kept apart from the plotting (:mod:`mtrl.tracking.report_plot`), which
imports this module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mtrl.tracking.report_data import RunData

RETURN = "task/{task}/return"
SCORE = "task/{task}/normalized_score"


def format_return(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits in plain notation: 0.955 → ``0.955`` (not
    ``1.0``), 474.96 → ``475``, -20.71 → ``-20.7``, 0.0012345 → ``0.00123``, 12345.6 →
    ``12346`` (whole numbers keep every digit)."""
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def last_returns(runs: Sequence[RunData], tasks: Sequence[str]) -> list[str]:
    """One line per run with returns: ``last mean return: cartpole 475, breakout 0.955`` (the
    run's name first when there are several)."""
    lines = []
    for run in runs:
        parts = [
            f"{t} {format_return(v)}"
            for t in tasks
            if (v := run.last(RETURN.format(task=t))) is not None
        ]
        if parts:
            who = f"{run.label}: " if len(runs) > 1 else ""
            lines.append(f"{who}last mean return: {', '.join(parts)}")
    return lines


def unscored_tasks(runs: Sequence[RunData], tasks: Sequence[str]) -> list[str]:
    """Tasks with returns but no normalised score in any run: absent from the score figures."""

    def some(key: str) -> bool:
        return any(r.has(key) for r in runs)

    return [t for t in tasks if some(RETURN.format(task=t)) and not some(SCORE.format(task=t))]
