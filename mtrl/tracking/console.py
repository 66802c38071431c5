"""Console progress: a live rich table, plain lines, or JSON lines — or nothing.

``TrackingConfig.console`` picks one (:func:`make_console`): ``auto`` is rich on a terminal and
plain lines otherwise (logs of batch jobs stay readable); ``jsonl`` is one JSON object per
record on stdout for tools; ``quiet`` shows nothing. All read the metric names listed in
:mod:`mtrl.tracking`.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from mtrl.tracking.sinks import Sink, finite_or_none, jsonable


def format_duration(seconds: float | None) -> str:
    """``3725`` → ``1:02:05``; days are spelled out; None → ``-``."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "-"
    s = round(seconds)
    days, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    text = f"{h}:{m:02d}:{s:02d}"
    return f"{days}d {text}" if days else text


def _num(value: Any, fmt: str) -> str:
    x = finite_or_none(value)
    return "-" if x is None else format(x, fmt)


class RateEstimator:
    """Average env steps/s since the first record seen, and the ETA to ``total``.

    Uses ``charts/elapsed_s`` when present (the trainer's clock), wall time otherwise. The
    rate is measured from the first record *this* estimator saw, so a resumed run's earlier
    steps do not inflate it.
    """

    def __init__(self, total: int | None) -> None:
        self.total = total
        self._first: tuple[float, float] | None = None
        self.rate: float | None = None

    def update(self, record: dict[str, Any]) -> None:
        steps = finite_or_none(record.get("charts/env_steps"))
        if steps is None:
            return
        t = finite_or_none(record.get("charts/elapsed_s"))
        t = time.monotonic() if t is None else t
        if self._first is None or t < self._first[1]:
            # The first record's rate includes start-up (imports, actor spawns, first resets):
            # an ETA from it reads hours for a one-minute run. No ETA until a second record.
            self._first = (steps, t)
            self.rate = None
            return
        dt = t - self._first[1]
        if dt > 0:
            self.rate = (steps - self._first[0]) / dt

    def eta(self, steps: float | None) -> float | None:
        if self.total is None or steps is None or not self.rate or self.rate <= 0:
            return None
        return max(self.total - steps, 0) / self.rate


def actors_per_node_text(record: dict[str, Any]) -> str:
    """``actors 3@1a2b3c 2@4d5e6f`` (count @ Ray node id prefix) in a Ray run, else ``""``."""
    prefix = "actors/node/"
    per_node = [(k[len(prefix) :], v) for k, v in record.items() if k.startswith(prefix)]
    return "actors " + " ".join(f"{v:.0f}@{n[:6]}" for n, v in sorted(per_node)) if per_node else ""


class PlainConsole:
    """One readable line per record: steps, steps/s, ETA, each task's return and faults (a
    task that has not made a step yet shows ``waiting``, with its faults if any)."""

    def __init__(
        self,
        task_names: list[str],
        stream: TextIO | None = None,
        *,
        total_env_steps: int | None = None,
    ) -> None:
        self.task_names = list(task_names)
        self.stream = stream or sys.stdout
        self.rate = RateEstimator(total_env_steps)

    def write(self, record: dict[str, Any]) -> None:
        self.rate.update(record)
        steps = finite_or_none(record.get("charts/env_steps"))
        parts = [
            f"steps {_num(steps, '>11,.0f')}",
            f"sps {_num(record.get('charts/sps'), '>7,.0f')}",
        ]
        if self.rate.total:
            parts.append(f"ETA {format_duration(self.rate.eta(steps))}")
        if nodes := actors_per_node_text(record):
            parts.append(nodes)
        for name in self.task_names:
            ret = finite_or_none(record.get(f"task/{name}/return"))
            task_steps = finite_or_none(record.get(f"task/{name}/env_steps"))
            if ret is not None:
                text = f"{name.split('/')[-1]} {ret:8.1f}"
            elif task_steps == 0:  # no step yet: starting, or its actors keep failing
                text = f"{name.split('/')[-1]} waiting"
            else:
                continue  # stepping, no finished episode yet
            faults = finite_or_none(record.get(f"task/{name}/faults"))
            if faults:
                text += f" ({faults:.0f} faults)"
            parts.append(text)
        print(" | ".join(parts), file=self.stream, flush=True)

    def close(self) -> None:
        pass


class JsonlConsole:
    """One JSON object per record on stdout (for batch jobs and tools that parse logs)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout

    def write(self, record: dict[str, Any]) -> None:
        print(json.dumps(record, allow_nan=True, default=jsonable), file=self.stream, flush=True)

    def close(self) -> None:
        pass


class RichProgress:
    """A live table: per task return, normalised score, episodes, length, actors, faults;
    overall progress bar, steps/s, elapsed time and ETA.

    Redraws on each record (no refresh thread). On a console that is not a terminal, rich
    prints the final table when the display stops.
    """

    def __init__(
        self,
        task_names: list[str],
        total_env_steps: int | None = None,
        *,
        title: str = "mtrl",
        console: Any = None,
    ) -> None:
        from rich.console import Console
        from rich.live import Live

        self.task_names = list(task_names)
        self.title = title
        self.rate = RateEstimator(total_env_steps)
        self.record: dict[str, Any] = {}
        self.console = console or Console()
        self.live = Live(self.render(), console=self.console, auto_refresh=False, transient=False)
        self.live.start()

    def write(self, record: dict[str, Any]) -> None:
        self.record = dict(record)
        self.rate.update(record)
        self.live.update(self.render(), refresh=True)

    def close(self) -> None:
        self.live.stop()

    def render(self) -> Any:
        """The current view as a rich renderable (a header line, a bar and the task table)."""
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        r = self.record
        steps = finite_or_none(r.get("charts/env_steps"))
        total = self.rate.total
        head = Text(f"{self.title}  ", style="bold")
        done = f"{steps or 0:,.0f}" + (f" / {total:,} env steps" if total else " env steps")
        if total:
            done += f" ({100 * (steps or 0) / total:.1f}%)"
        head.append(done)
        bits = [
            f"{_num(r.get('charts/sps'), ',.0f')} steps/s",
            f"elapsed {format_duration(finite_or_none(r.get('charts/elapsed_s')))}",
            f"ETA {format_duration(self.rate.eta(steps))}",
            f"updates {_num(r.get('charts/updates'), ',.0f')}",
            f"policy lag {_num(r.get('charts/policy_lag'), '.1f')}",
        ]
        faults = sum(finite_or_none(r.get(f"task/{n}/faults")) or 0 for n in self.task_names)
        if faults:
            bits.append(f"[red]faults {faults:.0f}[/]")
        if nodes := actors_per_node_text(r):
            bits.append(nodes)
        parts: list[Any] = [head, Text.from_markup("  ".join(bits))]
        if total:
            bar = Table.grid()  # a bar alone does not end its line inside a Group
            bar.add_row(ProgressBar(total=float(total), completed=float(steps or 0), width=60))
            parts.append(bar)
        parts.append(self._table())
        return Group(*parts)

    def _table(self) -> Any:
        from rich.table import Table

        r = self.record
        table = Table()
        table.add_column("task", overflow="fold")
        for col in ("return", "normalised", "episodes", "ep. length", "actors", "env steps"):
            table.add_column(col, justify="right")
        table.add_column("faults", justify="right")
        for n in self.task_names:
            faults = finite_or_none(r.get(f"task/{n}/faults"))
            quarantined = bool(finite_or_none(r.get(f"task/{n}/quarantined")))
            fault_text = "-" if faults is None else f"{faults:.0f}"
            if quarantined:
                fault_text = f"[red]{fault_text} quarantined[/]"
            elif faults:
                fault_text = f"[yellow]{fault_text}[/]"
            table.add_row(
                n,
                _num(r.get(f"task/{n}/return"), ".1f"),
                _num(r.get(f"task/{n}/normalized_score"), ".2f"),
                _num(r.get(f"task/{n}/episodes"), ",.0f"),
                _num(r.get(f"task/{n}/episode_length"), ".0f"),
                _num(r.get(f"scheduler/{n}/actors"), ".0f"),
                _num(r.get(f"task/{n}/env_steps"), ",.0f"),
                fault_text,
            )
        return table


def make_console(
    mode: str,
    task_names: list[str],
    total_env_steps: int | None = None,
    *,
    title: str = "mtrl",
    stream: TextIO | None = None,
) -> Sink | None:
    """The console sink ``mode`` names (``auto``, ``rich``, ``plain``, ``jsonl``, ``quiet``)."""
    stream = stream or sys.stdout
    if mode == "auto":
        isatty = getattr(stream, "isatty", None)
        mode = "rich" if callable(isatty) and isatty() else "plain"
    if mode == "quiet":
        return None
    if mode == "plain":
        return PlainConsole(task_names, stream, total_env_steps=total_env_steps)
    if mode == "jsonl":
        return JsonlConsole(stream)
    if mode == "rich":
        from rich.console import Console

        return RichProgress(task_names, total_env_steps, title=title, console=Console(file=stream))
    raise ValueError(f"unknown console mode {mode!r}; use auto, rich, plain, jsonl or quiet")
