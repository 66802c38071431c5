"""``make_sinks``: a run's trackers and its console, behind one :class:`mtrl.tracking.Sink`.

Trackers come from the hook ``mtrl_register_trackers``: the built-in ones (run files, wandb,
TensorBoard; :mod:`mtrl.tracking.builtin`) and plugins' alike, chosen by
:func:`tracker_factories`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mtrl.config import ExperimentConfig
from mtrl.config.plugin_sections import check_sections
from mtrl.disk_faults import describe, disk_fault
from mtrl.errors import UserError
from mtrl.plugins.tracker_registrar import TrackerSpec
from mtrl.tracking.builtin import BUILTIN_TRACKERS, PLUGIN
from mtrl.tracking.console import make_console
from mtrl.tracking.sinks import Sink, SinkGroup, TrackerFactory

if TYPE_CHECKING:
    from mtrl.plugins import Plugins

log = logging.getLogger("mtrl.tracking")


@dataclass(frozen=True)
class PluginTracker:
    """A registered tracker's factory, labelled with its name and plugin for reports.

    ``builtin``: offered by a plugin of mtrl itself; its failure to start stops the run (a run
    directory that cannot be written, a TensorBoard asked for and not installed), where a
    third-party tracker's is reported and left out.
    """

    spec: TrackerSpec
    builtin: bool = False

    @property
    def label(self) -> str:
        return f"tracker {self.spec.name!r} (plugin {self.spec.plugin!r})"

    def __call__(
        self, cfg: ExperimentConfig, run_dir: Path | None, task_names: list[str]
    ) -> Sink | None:
        model = self.spec.settings
        if model is None:
            return self.spec.factory(cfg, run_dir, task_names)
        return self.spec.factory(cfg, run_dir, task_names, _settings(cfg, self.spec.name, model))


def _settings(cfg: ExperimentConfig, name: str, model: type) -> Any:
    """Tracker ``name``'s validated section (None when the config has none). A config checked
    without the installed trackers' models (built in code) holds a plain mapping: the model
    validates it here, and a bad key stops the tracker's start like any factory error."""
    section = cfg.tracking.section(name)
    if section is None or isinstance(section, model):
        return section
    return check_sections({name: section}, (), {name: model})[name]


def builtin_trackers() -> list[TrackerFactory]:
    """The built-in trackers as :mod:`mtrl.tracking.builtin` registers them, without loading
    any plugin (tools and tests that build sinks for a run directory)."""
    return [
        PluginTracker(TrackerSpec(name, factory, PLUGIN, description), builtin=True)
        for name, (factory, description) in BUILTIN_TRACKERS.items()
    ]


def tracker_factories(cfg: ExperimentConfig, plugins: Plugins) -> list[TrackerFactory]:
    """The trackers of a run, in order: every tracker of a built-in plugin (each switched on
    or off by its own setting of ``cfg.tracking``), then the other plugins' trackers that
    ``cfg.tracking.trackers`` selects (None: all registered).

    An unknown name raises :class:`~mtrl.plugins.tracker_registrar.UnknownTrackerError` with
    the closest registered one; a name listed twice, or a built-in one listed, runs once.
    """
    registry = plugins.trackers

    def builtin(name: str) -> bool:
        info = plugins.infos.get(registry.get(name).plugin)
        return info is not None and info.builtin

    chosen = cfg.tracking.trackers
    names = registry.names() if chosen is None else list(dict.fromkeys(chosen))
    builtins = [n for n in registry.names() if builtin(n)]
    others = [n for n in names if not builtin(n)]
    return [PluginTracker(registry.get(n), builtin=True) for n in builtins] + [
        PluginTracker(registry.get(n)) for n in others
    ]


def _label(factory: Any) -> str:
    return (
        getattr(factory, "label", None)
        or f"tracker {getattr(factory, '__qualname__', None) or repr(factory)}"
    )


def _start(
    factory: TrackerFactory, cfg: ExperimentConfig, run_dir: Path | None, task_names: list[str]
) -> Sink | None:
    """``factory``'s sink, or None when it stays out; a third-party tracker that fails to
    start, or returns something that is not a sink, is reported and left out."""
    try:
        sink = factory(cfg, run_dir, list(task_names))
    except Exception as e:
        if getattr(factory, "builtin", False):
            if (fault := disk_fault(e)) is not None:  # the run files cannot be written
                raise UserError(
                    f"{_label(factory)} cannot write into {run_dir}: {describe(fault)}"
                ) from None
            raise
        log.warning(
            "tracking: %s failed to start and is left out: %s: %s",
            _label(factory),
            type(e).__name__,
            e,
        )
        return None
    if sink is not None and not isinstance(sink, Sink):
        log.warning(
            "tracking: %s returned a %s, which has no write/close; left out",
            _label(factory),
            type(sink).__name__,
        )
        return None
    return sink


def make_sinks(
    cfg: ExperimentConfig,
    run_dir: Path | None,
    task_names: list[str],
    trackers: Iterable[TrackerFactory] | None = None,
    *,
    console: str | None = None,
    stream: TextIO | None = None,
) -> SinkGroup:
    """The sinks of ``trackers`` (default: :func:`builtin_trackers`, i.e. metrics.jsonl,
    metrics.csv and episodes.csv in ``run_dir``, wandb, TensorBoard), then the console.

    A run passes :func:`tracker_factories`. ``console`` overrides ``cfg.tracking.console``
    (e.g. ``"quiet"`` in tests). A third-party tracker whose factory raises is reported by
    name and left out; the run goes on. Close the returned group once at the end (the console
    comes last, so it stops first and later messages stay visible).
    """
    sinks = SinkGroup()
    for factory in builtin_trackers() if trackers is None else trackers:
        try:
            sink = _start(factory, cfg, run_dir, task_names)
        except BaseException:
            sinks.close()  # what already started (a wandb thread, open files) is let go
            raise
        if sink is not None:
            sinks.add(sink, getattr(factory, "label", None))
    view = make_console(
        console or cfg.tracking.console,
        list(task_names),
        cfg.total_env_steps,
        title=Path(run_dir).name if run_dir is not None else cfg.name,
        stream=stream,
    )
    if view is not None:
        sinks.add(view)
    return sinks
