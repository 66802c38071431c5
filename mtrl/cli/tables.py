"""The tables the ``mtrl`` command line prints (plugins, envs, training results, evaluation).

Output formatting only: each function takes what a subcommand of :mod:`mtrl.cli` already
computed and prints it as a rich table; none decides anything. Kept apart from the command's
wiring so that ``--json`` output and ``--version`` never import rich (the commands import
this module only when they print a table).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from mtrl.plugins.manager import PluginInfo
    from mtrl.train.evaluate import EvalCheckpoint, EvalResult
    from mtrl.train.progress import TrainResult

STATUS_COLOUR = {"ok": "green", "error": "red", "unavailable": "yellow", "disabled": "dim"}


def console() -> Console:
    """A console for the tables; wide enough for env spaces when piped (rich assumes 80
    columns without a terminal)."""
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 160)


def print_plugins(infos: Iterable[PluginInfo]) -> None:
    """``mtrl plugins``: one row per plugin, its status coloured, its load errors as notes."""
    table = Table(title="mtrl plugins")
    cols = ("name", "status", "version", "package", "hooks", "envs", "offers", "notes")
    for col in cols:
        table.add_column(col, overflow="fold")
    for i in infos:
        table.add_row(
            i.name,
            f"[{STATUS_COLOUR[i.status]}]{i.status}[/]",
            i.version or ("built-in" if i.builtin else "-"),
            i.package or "-",
            ", ".join(i.hooks) or "-",
            str(len(i.envs)),
            _offers(i),
            "\n".join(i.errors),
        )
    console().print(table)


def _offers(info: PluginInfo) -> str:
    """What a plugin offers besides envs: learning rules, scheduling policies, trackers."""
    parts = [
        f"{kind}: {', '.join(names)}"
        for kind, names in (
            ("algorithms", info.algorithms),
            ("schedulers", info.schedulers),
            ("trackers", info.trackers),
        )
        if names
    ]
    return "\n".join(parts) or "-"


def print_envs(rows: Sequence[dict[str, str]]) -> None:
    """``mtrl envs``: id, observation and action space per env; an env that could not be built
    shows its error in red instead of its spaces."""
    table = Table(title=f"mtrl envs ({len(rows)})")
    for col in ("id", "observation", "action"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r["id"], r.get("observation", f"[red]{r.get('error', '')}[/]"), r.get("action", "")
        )
    console().print(table)


def print_train_results(result: TrainResult) -> None:
    """``mtrl train``'s final table: per task the env steps, episodes, recent mean return, the
    greedy eval (when it ran), normalised score and target; when any actor failed, each task's
    fault count and last error (a task with no steps says so, and why where the actors know:
    no room in the Ray cluster). Then the run directory.

    Steps/s counts this session's steps only: a resumed run's earlier steps took earlier time.
    """
    greedy = result.greedy_episodes > 0
    faulty = any(t.faults or t.quarantined for t in result.tasks)
    steps = f"{result.env_steps:,} env steps"
    if result.start_env_steps:
        steps += f" ({result.session_env_steps:,} this session)"
    table = Table(
        title=f"{steps}, {result.updates} updates, "
        f"{result.seconds:.0f} s ({result.steps_per_s:,.0f} steps/s)",
        caption=f"greedy eval: {result.greedy_episodes} episodes per task, greedy actions of "
        "the final agent, eval seeds; solved: both returns at target"
        if greedy
        else None,
    )
    succeeds = any(t.success_rate is not None for t in result.tasks)
    columns = ["task", "env steps", "episodes", "mean return (last 20)"]
    columns += ["greedy eval"] if greedy else []
    columns += ["success (last 20)"] if succeeds else []
    columns += ["normalised", "target"]
    columns += ["faults", "last error"] if faulty else []
    for col in columns:
        table.add_column(col, overflow="fold")
    fmt = lambda x, f: "-" if x is None else format(x, f)  # noqa: E731
    for t in result.tasks:
        mark = {True: " [green]solved[/]", False: "", None: ""}[t.solved]
        returns = [fmt(t.mean_return, ".1f")] + ([fmt(t.greedy_eval, ".1f")] if greedy else [])
        returns += [fmt(t.success_rate, ".0%")] if succeeds else []
        cells = [
            t.name,
            f"{t.env_steps:,}" if t.env_steps else _no_steps(t.no_steps_reason),
            str(t.episodes),
            *returns,
            fmt(t.normalized_score, ".2f"),
            fmt(t.target_score, "g") + mark,
        ]
        if faulty:
            count = f"{t.faults}" + (" [red]quarantined[/]" if t.quarantined else "")
            cells += [count, escape(_shorten(t.last_error, 200)) if t.last_error else "-"]
        table.add_row(*cells)
    console().print(table)
    if result.run_dir:
        print(f"run directory: {result.run_dir}")


def _no_steps(reason: str) -> str:
    """The env-steps cell of a task that made none, with why where it is known."""
    return f"[yellow]0 (no steps: {escape(reason)})[/]" if reason else "[yellow]0 (no steps)[/]"


def _shorten(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def print_eval(ckpt: EvalCheckpoint, results: Iterable[EvalResult]) -> None:
    """``mtrl eval``: per task and mode the episodes, mean ± std return, normalised score,
    mean episode length and, where an env reports success, the share of episodes that
    succeeded; titled with the checkpoint and its env steps."""
    steps = f"{ckpt.env_steps:,} env steps" if ckpt.env_steps is not None else "?"
    results = list(results)
    succeeds = any(r.success_rate is not None for r in results)
    table = Table(title=f"{ckpt.path} ({steps})")
    columns = ["task", "mode", "episodes", "return (mean ± std)", "normalised", "length"]
    columns += ["success"] if succeeds else []
    for col in columns:
        table.add_column(col, justify="left" if col in ("task", "mode") else "right")
    for r in results:
        norm = "-" if r.normalized_score is None else f"{r.normalized_score:.2f}"
        cells = [
            r.task,
            r.mode,
            str(r.episodes),
            f"{r.mean_return:.1f} ± {r.std_return:.1f}",
            norm,
            f"{r.mean_length:.0f}",
        ]
        if succeeds:
            cells.append("-" if r.success_rate is None else f"{r.success_rate:.0%}")
        table.add_row(*cells)
    console().print(table)
