"""``make_sinks``: every tracker a config asks for, behind one :class:`~mtrl.tracking.Sink`.

Plugin trackers (hook ``mtrl_register_trackers``) reach it through :func:`tracker_factories`.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mtrl.config import ExperimentConfig
from mtrl.tracking.console import make_console
from mtrl.tracking.csv_sink import CsvSink
from mtrl.tracking.episodes import FILENAME as EPISODES_FILE
from mtrl.tracking.episodes import EpisodeCsvSink
from mtrl.tracking.sinks import JsonlSink, Sink, SinkGroup

if TYPE_CHECKING:
    from mtrl.plugins import Plugins
    from mtrl.plugins.tracker_registrar import TrackerSpec

log = logging.getLogger("mtrl.tracking")

#: ``factory(cfg, run_dir, task_names) -> Sink | None``; what tracker plugins register.
#: A factory with a ``label`` attribute is reported by it, else by its ``__qualname__``.
TrackerFactory = Callable[[ExperimentConfig, "Path | None", list[str]], "Sink | None"]


@dataclass(frozen=True)
class PluginTracker:
    """A registered tracker's factory, labelled with its name and plugin for reports."""

    spec: TrackerSpec

    @property
    def label(self) -> str:
        return f"tracker {self.spec.name!r} (plugin {self.spec.plugin!r})"

    def __call__(
        self, cfg: ExperimentConfig, run_dir: Path | None, task_names: list[str]
    ) -> Sink | None:
        return self.spec.factory(cfg, run_dir, task_names)


def tracker_factories(cfg: ExperimentConfig, plugins: Plugins) -> list[TrackerFactory]:
    """The plugin trackers ``cfg.tracking.trackers`` selects (None: all registered), in order.

    An unknown name raises :class:`~mtrl.plugins.tracker_registrar.UnknownTrackerError` with
    the closest registered one; a name listed twice runs once.
    """
    chosen = cfg.tracking.trackers
    registry = plugins.trackers
    names = registry.names() if chosen is None else list(dict.fromkeys(chosen))
    return [PluginTracker(registry.get(name)) for name in names]


def _label(factory: Any) -> str:
    return (
        getattr(factory, "label", None)
        or f"tracker {getattr(factory, '__qualname__', None) or repr(factory)}"
    )


def wandb_enabled(cfg: ExperimentConfig) -> bool:
    """Whether to start a wandb sink (decided without importing wandb).

    Off when the config or ``WANDB_MODE`` says ``disabled``, and in ``auto`` mode when wandb
    is not installed (an explicit online/offline mode without wandb is reported instead).
    """
    mode = cfg.tracking.wandb.mode
    if mode == "auto":
        if os.environ.get("WANDB_MODE", "").strip().lower() == "disabled":
            return False
        if importlib.util.find_spec("wandb") is None:
            log.info("tracking: wandb is not installed; `pip install wandb` to use it")
            return False
        return True
    return mode != "disabled"


def make_sinks(
    cfg: ExperimentConfig,
    run_dir: Path | None,
    task_names: list[str],
    extra: Iterable[TrackerFactory] = (),
    *,
    console: str | None = None,
    stream: TextIO | None = None,
) -> SinkGroup:
    """Files in ``run_dir`` (metrics.jsonl, metrics.csv, episodes.csv), wandb, extra trackers,
    the console.

    ``console`` overrides ``cfg.tracking.console`` (e.g. ``"quiet"`` in tests). An extra
    tracker whose factory raises is reported by name and left out; the run goes on. Close the
    returned group once at the end (the console stops first, so later messages stay visible).
    """
    sinks = SinkGroup()
    tc = cfg.tracking
    if run_dir is not None:
        sinks.add(JsonlSink(Path(run_dir) / "metrics.jsonl"))
        if tc.csv:
            sinks.add(CsvSink(Path(run_dir) / "metrics.csv"))
        sinks.add(EpisodeCsvSink(Path(run_dir) / EPISODES_FILE))
    if wandb_enabled(cfg):
        from mtrl.tracking.wandb_sink import WandbSink

        name = Path(run_dir).name if run_dir is not None else cfg.name
        sinks.add(
            WandbSink(tc.wandb, name=name, config=cfg.model_dump(mode="json"), run_dir=run_dir)
        )
    for factory in extra:
        try:
            sink = factory(cfg, run_dir, list(task_names))
        except Exception as e:
            log.warning(
                "tracking: %s failed to start and is left out: %s: %s",
                _label(factory),
                type(e).__name__,
                e,
            )
            continue
        if sink is None:
            continue
        if not isinstance(sink, Sink):
            log.warning(
                "tracking: %s returned a %s, which has no write/close; left out",
                _label(factory),
                type(sink).__name__,
            )
            continue
        sinks.add(sink, getattr(factory, "label", None))
    view = make_console(
        console or tc.console,
        list(task_names),
        cfg.total_env_steps,
        title=Path(run_dir).name if run_dir is not None else cfg.name,
        stream=stream,
    )
    if view is not None:
        sinks.add(view)
    return sinks
