"""Metric trackers offered by plugins: the registrar hooks receive and the registry of all.

What a tracker is (a :class:`mtrl.tracking.Sink` built per run) is defined in
:mod:`mtrl.tracking`; the shared mechanics are :mod:`mtrl.plugins.named_registry`.

A tracker may bring its settings as a pydantic model (``settings=``): the config's
``tracking.<name>:`` section is then validated with that model, like every other key, and the
factory gets the validated section as its fourth argument. The registry hands the models to
config validation (:meth:`TrackerRegistry.settings_models`), so the config layer never imports
this one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from mtrl.errors import UnknownNameError
from mtrl.names import NO_TRACKERS
from mtrl.plugins.named_registry import NamedRegistrar, NamedRegistry


class UnknownTrackerError(UnknownNameError):
    """A tracker name that no loaded plugin registered."""


@dataclass(frozen=True)
class TrackerSpec:
    """One tracker: ``factory(cfg, run_dir, task_names) -> Sink | None`` and who offers it.

    ``settings``: the pydantic model of the tracker's ``tracking.<name>:`` section, or None
    for a tracker without settings; with one, the factory is called as
    ``factory(cfg, run_dir, task_names, settings)`` (the validated section, None when the
    config has none).
    """

    name: str
    factory: Callable[..., Any]
    plugin: str
    description: str = ""
    settings: type[BaseModel] | None = None


class TrackerRegistry(NamedRegistry[TrackerSpec]):
    """Tracker names of every loaded plugin (one flat namespace, first registration wins)."""

    noun = "tracker"
    unknown_error = UnknownTrackerError
    none_known = NO_TRACKERS

    def settings_models(self) -> dict[str, type[BaseModel] | None]:
        """Every tracker's name -> its settings model (None: it takes none), in registration
        order: what config validation checks ``tracking.<name>:`` sections against."""
        return {spec.name: spec.settings for spec in self}


class TrackerRegistrar(NamedRegistrar[TrackerSpec]):
    """Collects one plugin's trackers; malformed registrations become ``problems``."""

    noun = "tracker"
    what = "factory"
    arguments = ("cfg", "run_dir", "task_names")

    def make_spec(self, name: str, obj: Callable[..., Any], description: str) -> TrackerSpec:
        return TrackerSpec(name, obj, self.plugin, description)

    def tracker(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        description: str = "",
        settings: type[BaseModel] | None = None,
    ) -> None:
        """Register one tracker (see :func:`mtrl.plugins.hookspecs.mtrl_register_trackers`)."""
        if settings is not None and not (
            isinstance(settings, type) and issubclass(settings, BaseModel)
        ):
            self.problems.append(
                f"{self.noun} {name!r}: settings must be a pydantic BaseModel subclass, "
                f"got {settings!r}"
            )
            return
        before = len(self.specs)
        arguments = (*self.arguments, "settings") if settings is not None else None
        self._register(name, factory, description, arguments)
        if settings is not None and len(self.specs) > before:
            spec = self.specs[-1]
            self.specs[-1] = TrackerSpec(
                spec.name, spec.factory, spec.plugin, spec.description, settings
            )

    __call__ = tracker
