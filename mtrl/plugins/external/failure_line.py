"""A simulation's failure said in one line: what mtrl saw, the simulation's own last output
line (the one that explains a crash: ``ModuleNotFoundError: No module named 'x'``) and where
its whole log is.

:class:`~mtrl.plugins.external.SimulationError` messages quote the end of the log on lines of
their own, which suits an actor's fault report; a command that stops on the failure
(``mtrl validate``, ``mtrl train`` with a simulation that cannot start or with serial actors)
says it in one line instead, through :func:`one_line`.
"""

from __future__ import annotations

import os
from pathlib import Path

from mtrl.coupling.protocol import SimulationError
from mtrl.plugins.external.sim_logs import QUOTE, TAIL_END

#: How much of a log's end is read to find its last line.
_TAIL_BYTES = 8192


def last_output_line(log: Path | None) -> str:
    """The last non-blank line a simulation wrote to ``log`` (not mtrl's own ``[mtrl: ...]``
    notes); '' when there is none or the log is gone."""
    if log is None:
        return ""
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(f.tell() - _TAIL_BYTES, 0))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line and not line.startswith("[mtrl"):
            return line
    return ""


def last_quoted_line(text: str) -> str:
    """The last line of a simulation's output that ``text`` (a failure's message) quotes
    (:func:`~mtrl.plugins.external.sim_logs.log_tail`), not mtrl's own notes; '' if none."""
    lines = text.splitlines()
    quoted = [line[len(QUOTE) :].strip() for line in lines if line.startswith(QUOTE.rstrip())]
    quoted = [line for line in quoted if line and not line.startswith("[mtrl")]
    return quoted[-1] if quoted else ""


def one_line(error: BaseException, log: Path | None = None) -> str:
    """``error`` in one line: its message's first line, then, for a simulation's failure, the
    simulation's last output line and where its whole log is (``log``, else the one the error
    carries). Another exception: its type and first line."""
    if not isinstance(error, SimulationError):
        first = (str(error).splitlines() or [""])[0]
        return f"{type(error).__name__}: {first}" if first else type(error).__name__
    first = (str(error).splitlines() or [type(error).__name__])[0]
    log = log or error.log
    last = last_output_line(log) or last_quoted_line(str(error))  # the log may be gone
    said = f"; its last output line: {last}" if last and last not in first else ""
    where = f" (whole log: {log})" if log is not None and Path(log).exists() else ""
    return f"{first}{said}{where}"


def condense(text: str) -> str:
    """A fault's text (an actor's report of a simulation's failure, whose message quotes its
    log's last lines: :func:`~mtrl.plugins.external.sim_logs.log_tail`) in one line: its
    first line, the last quoted line and where the whole log is. Other text: its first line."""
    lines = text.splitlines()
    if not lines:
        return ""
    last = last_quoted_line(text)
    said = f"; its last output line: {last}" if last else ""
    end = next((line for line in lines if line.startswith(TAIL_END)), "")
    where = ""
    if "(whole log: " in end:
        where = " (whole log: " + end.split("(whole log: ", 1)[1].split(") ---", 1)[0] + ")"
    return f"{lines[0]}{said}{where}"
