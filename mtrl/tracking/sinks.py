"""The sink protocol, the JSON-lines metrics file, and a fan-out that isolates failing sinks."""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mtrl.disk_faults import describe, disk_fault

if TYPE_CHECKING:
    from mtrl.config import ExperimentConfig

log = logging.getLogger("mtrl.tracking")


@runtime_checkable
class Sink(Protocol):
    """Where metric records go. A record maps metric names to numbers (see mtrl.tracking)."""

    def write(self, record: dict[str, Any]) -> None:
        """Take one record; must not keep a reference that the caller may mutate later."""

    def close(self) -> None:
        """Flush and release resources; called once at the end of the run."""


@runtime_checkable
class EpisodeSink(Protocol):
    """A sink that also takes every finished episode (optional: most sinks take records only).

    Called on the training thread for each unroll that finished episodes, so it must return at
    once: keep the episodes and write them with the next record (``write``) or at ``close``.
    """

    def add_episodes(
        self,
        task: str,
        env_steps: int,
        returns: Sequence[float],
        lengths: Sequence[int],
        wall_s: float,
    ) -> None:
        """``task``'s episodes that just ended: their returns (unscaled) and lengths, with the
        task's own env steps and the run's wall seconds (``charts/elapsed_s``'s clock) now."""


#: ``factory(cfg, run_dir, task_names) -> Sink | None``: what a tracker registers (the hook
#: ``mtrl_register_trackers``). A factory with a ``label`` attribute is reported by it, else by
#: its ``__qualname__``.
TrackerFactory = Callable[["ExperimentConfig", "Path | None", list[str]], "Sink | None"]


def jsonable(value: Any) -> Any:
    """numpy / torch scalars → Python numbers, so every sink can serialise a record."""
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    raise TypeError(f"{type(value).__name__} is not a metric value")


class JsonlSink:
    """Appends one JSON object per record to ``metrics.jsonl``; flushed each write.

    Non-finite floats are written as ``NaN``/``Infinity`` (Python's json and pandas read them).
    Opening appends, so a resumed run continues the same file.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._f = self.path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._f.write(json.dumps(record, allow_nan=True, default=jsonable) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


class SinkGroup:
    """Several sinks behind one :class:`Sink`; a sink that raises is reported once and dropped.

    Training must never stop because a tracker failed (a full disk, a broken plugin): the
    failure is one warning line (for a disk fault: which file, and why), never a traceback.
    ``close`` runs in reverse order, so a console listed last stops its live display before
    other sinks print their farewells.
    """

    def __init__(self, sinks: Iterable[Sink] = ()) -> None:
        self.sinks: list[Sink] = list(sinks)
        self._labels: dict[int, str] = {}

    def __iter__(self) -> Iterator[Sink]:
        return iter(self.sinks)

    def __len__(self) -> int:
        return len(self.sinks)

    def add(self, sink: Sink, label: str | None = None) -> None:
        """Append ``sink``; ``label`` names it in failure reports (default: its class name)."""
        self.sinks.append(sink)
        if label:
            self._labels[id(sink)] = label

    def write(self, record: dict[str, Any]) -> None:
        for sink in list(self.sinks):
            try:
                sink.write(record)
            except Exception as e:
                self._drop(sink, e)

    def add_episodes(
        self,
        task: str,
        env_steps: int,
        returns: Sequence[float],
        lengths: Sequence[int],
        wall_s: float,
    ) -> None:
        """Give finished episodes to the sinks that take them (:class:`EpisodeSink`)."""
        if not len(returns):
            return
        for sink in list(self.sinks):
            add = getattr(sink, "add_episodes", None)
            if add is None:
                continue
            try:
                add(task, env_steps, returns, lengths, wall_s)
            except Exception as e:
                self._drop(sink, e)

    def _drop(self, sink: Sink, e: Exception) -> None:
        self.sinks.remove(sink)
        if (fault := disk_fault(e)) is None:
            log.warning("tracking: %s failed and is turned off: %s", self._name(sink), _short(e))
        else:  # a full or read-only disk: say where, and let the sink's files go quietly
            where = getattr(sink, "path", None)
            log.warning(
                "tracking: %s stopped writing%s: %s; training goes on without it",
                self._name(sink),
                f" {where}" if where is not None else "",
                describe(fault),
            )
            with contextlib.suppress(Exception):
                sink.close()
        self._labels.pop(id(sink), None)

    def close(self) -> None:
        for sink in reversed(self.sinks):
            try:
                sink.close()
            except Exception as e:
                log.warning("tracking: closing %s failed: %s", self._name(sink), _short(e))
        self.sinks = []
        self._labels = {}

    def _name(self, sink: object) -> str:
        return self._labels.get(id(sink)) or type(sink).__name__


def _short(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__


def finite_or_none(value: Any) -> float | None:
    """A float, or None for missing / non-numeric / non-finite values (display helpers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
