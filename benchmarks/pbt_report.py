"""The text report of the PBT-vs-independent benchmark (benchmarks/pbt_vs_independent.py): each
repeat's runs as a table, and the best run of each arm against the target, repeat by repeat.
Reads the figures :mod:`arm_figures` computed (the JSON's ``repeats``); computes nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import learning_stats as ls

ARMS = ("pbt", "independent")
"""The two arms, in the order the report lists them."""


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def repeat_table(tasks: Sequence[ls.Task], repeat: Mapping[str, Any]) -> str:
    """Each run of both arms: seconds to each target, to every target, final normalised."""
    short = [t.name.split("/")[-1][:14] for t in tasks]
    head = f"{'arm':<12}{'run':<10}" + "".join(f"{n + ' s':>17}" for n in short)
    head += f"{'every s':>9}{'at steps':>10}" + "".join(f"{n[:7] + ' fin':>12}" for n in short)
    lines = [f"repeat {repeat['repeat']} (arms in order {', '.join(repeat['order'])})", head]
    for name in ARMS:
        arm = repeat["arms"][name]
        summary = arm["summary"]
        for i, r in enumerate(arm["runs"]):
            mark = "*" if i == summary["best"] else " "
            row = f"{name:<12}{mark + r['label']:<10}"
            row += "".join(f"{_s(r['tasks'][t.name]['seconds_to_target']):>17}" for t in tasks)
            steps = r["run_env_steps_at_every_target"]
            row += f"{_s(r['seconds_to_every_target']):>9}{'-' if steps is None else steps:>10}"
            row += "".join(f"{_f(r['tasks'][t.name]['final_normalised']):>12}" for t in tasks)
            lines.append(row + ("  ERROR" if r.get("error") else ""))
        agg = (summary["final"] or {}).get("iqm") or None
        ci = "-" if not agg else f"{agg['point']:.3f} [{agg['ci_low']:.3f}, {agg['ci_high']:.3f}]"
        lines.append(
            f"  {name}: wall {_s(arm['wall_s'])} s; best {summary['best_label']} "
            f"(every target {_s(summary['best_seconds_to_every_target'])} s, final IQM "
            f"{_f(summary['best_final_iqm'])}); {summary['reached_every_target']}/"
            f"{summary['runs']} at every target; final IQM over runs x tasks {ci}"
        )
        for e in arm["errors"]:
            lines.append(f"  {name} ERROR: {e}")
    v = repeat["verdict"]
    lines.append(
        f"  PBT best vs independent best: every target sooner {v['sooner']}, final IQM no "
        f"lower {v['iqm_no_lower']} -> target {'met' if v['met'] else 'NOT met'}"
    )
    return "\n".join(lines)


def summary_lines(repeats: Sequence[Mapping[str, Any]]) -> list[str]:
    """PBT best against independent best, repeat by repeat, and whether the target held."""
    lines = ["", "summary: best run of each arm (seconds to every target; final IQM)"]
    for rep in repeats:
        p, q = rep["arms"]["pbt"]["summary"], rep["arms"]["independent"]["summary"]
        lines.append(
            f"  repeat {rep['repeat']}: PBT {_s(p['best_seconds_to_every_target'])} s, "
            f"{_f(p['best_final_iqm'])}; independent {_s(q['best_seconds_to_every_target'])} s, "
            f"{_f(q['best_final_iqm'])}; target {'met' if rep['verdict']['met'] else 'NOT met'}"
        )
    met = sum(r["verdict"]["met"] for r in repeats)
    lines.append(f"  target met in {met}/{len(repeats)} repeats")
    return lines
