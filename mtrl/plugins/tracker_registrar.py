"""Metric trackers offered by plugins: the registrar hooks receive and the registry of all.

What a tracker is (a :class:`mtrl.tracking.Sink` built per run) is defined in
:mod:`mtrl.tracking`; the shared mechanics are :mod:`mtrl.plugins.named_registry`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mtrl.errors import UserError
from mtrl.names import NO_TRACKERS
from mtrl.plugins.named_registry import NamedRegistrar, NamedRegistry


class UnknownTrackerError(UserError, KeyError):
    """A tracker name that no loaded plugin registered."""

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0])


@dataclass(frozen=True)
class TrackerSpec:
    """One tracker: ``factory(cfg, run_dir, task_names) -> Sink | None`` and who offers it."""

    name: str
    factory: Callable[..., Any]
    plugin: str
    description: str = ""


class TrackerRegistry(NamedRegistry[TrackerSpec]):
    """Tracker names of every loaded plugin (one flat namespace, first registration wins)."""

    noun = "tracker"
    unknown_error = UnknownTrackerError
    none_known = NO_TRACKERS


class TrackerRegistrar(NamedRegistrar[TrackerSpec]):
    """Collects one plugin's trackers; malformed registrations become ``problems``."""

    noun = "tracker"
    what = "factory"
    arguments = ("cfg", "run_dir", "task_names")

    def make_spec(self, name: str, obj: Callable[..., Any], description: str) -> TrackerSpec:
        return TrackerSpec(name, obj, self.plugin, description)

    def tracker(self, name: str, factory: Callable[..., Any], *, description: str = "") -> None:
        """Register one tracker (see :func:`mtrl.plugins.hookspecs.mtrl_register_trackers`)."""
        self._register(name, factory, description)

    __call__ = tracker
