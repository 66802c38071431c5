"""``mtrl report`` on a population's directory: how each member's score and hyperparameters
went, interval by interval (``population.png``), and a table of the members at their end.

Each member is one colour; the score is measured at each interval's end (a line through the
points), a hyperparameter holds over the interval it trained (steps). An exploit — a member
restarted from a better member's checkpoint — is a dot where it happened (the start of the
interval it trained with its new values), in the colour of the member copied. The members'
learning curves are drawn by the ordinary run report on their run directories.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mtrl.errors import UserError
from mtrl.tune.history import MemberHistory, member_label

__all__ = ["member_table", "write_population_figure"]

FIGURE = "population.png"


def _fmt(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def member_table(members: Sequence[MemberHistory]) -> list[str]:
    """One line per member, best last score first: its score and env steps at its last
    interval, its hyperparameters there, whom it copied at which env steps, and for how many
    intervals its trainer started anew."""
    ranked = sorted((m for m in members if m.intervals), key=lambda m: -m.intervals[-1].score)
    lines = []
    for m in ranked:
        last = m.intervals[-1]
        values = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(last.hyperparameters.items()))
        starts = [0, *(i.env_steps for i in m.intervals[:-1])]
        copies = [
            f"{member_label(i.copied_from)} at {start}"
            for start, i in zip(starts, m.intervals, strict=True)
            if i.copied_from is not None
        ]
        copied = f"; copied {', '.join(copies)}" if copies else ""
        started = sum(i.started for i in m.intervals)
        # Restarts cost actor start-up: a synchronous population restarts every member at
        # each meeting, an asynchronous one only those that copy (histories from before
        # the record was kept say nothing).
        starts_note = f"; started for {started} of {len(m.intervals)} intervals" if started else ""
        lines.append(
            f"{m.label}: score {last.score:.3g} at {last.env_steps} env steps ({values})"
            f"{copied}{starts_note}"
        )
    return lines


def write_population_figure(members: Sequence[MemberHistory], out: Path) -> Path:
    """Draw the score and every searched hyperparameter against env steps into
    ``out/population.png``."""
    members = [m for m in members if m.intervals]
    if not members:
        raise UserError("no member of the population has finished an interval yet")
    try:
        import matplotlib
    except ImportError:
        raise UserError("mtrl report needs matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    names = sorted({k for m in members for i in m.intervals for k in i.hyperparameters})
    panels = ["score", *names]
    cols = min(len(panels), 2)
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 3.6 * rows), squeeze=False)
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {m.trial: cycle[i % len(cycle)] for i, m in enumerate(members)}
    for ax, panel in zip(axes.flat, panels, strict=False):
        for m in members:
            x = [i.env_steps for i in m.intervals]
            if panel == "score":  # measured at each interval's end
                y = [i.score for i in m.intervals]
                ax.plot(x, y, marker=".", color=colour[m.trial], label=m.label)
                continue
            y = [i.hyperparameters.get(panel, float("nan")) for i in m.intervals]
            starts = [0, *x[:-1]]  # each value holds over the interval it ends
            ax.plot([0, *x], [y[0], *y], drawstyle="steps-pre", color=colour[m.trial])
            for start, i, value in zip(starts, m.intervals, y, strict=True):
                if i.copied_from is not None:
                    source = colour.get(i.copied_from, "black")
                    ax.plot([start], [value], "o", mfc=source, mec="black", ms=6)
        positive = [
            v
            for m in members
            for i in m.intervals
            for v in ([i.score] if panel == "score" else [i.hyperparameters.get(panel)])
            if isinstance(v, (int, float)) and v > 0
        ]
        if panel != "score" and positive and max(positive) / min(positive) > 20:
            ax.set_yscale("log")
        ax.set_title(panel)
        ax.set_xlim(left=0)
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 6), frameon=False)
    fig.text(
        0.5,
        0.005,
        "a dot: the member copied the checkpoint of the member of the dot's colour",
        ha="center",
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0.03, 1, 0.93))
    out.mkdir(parents=True, exist_ok=True)
    path = out / FIGURE
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
