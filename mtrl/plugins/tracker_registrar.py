"""Metric trackers offered by plugins: the registrar hooks receive and the registry of all.

The plugin layer stores tracker factories as opaque callables and only checks their shape;
what a tracker is (a :class:`mtrl.tracking.Sink` built per run) is defined in
:mod:`mtrl.tracking`, which imports this module and never the reverse.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mtrl.errors import PluginError, UserError

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")


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


class TrackerRegistry:
    """Tracker names of every loaded plugin (one flat namespace, first registration wins)."""

    def __init__(self) -> None:
        self._specs: dict[str, TrackerSpec] = {}

    def add(self, spec: TrackerSpec) -> None:
        if spec.name in self._specs:
            other = self._specs[spec.name].plugin
            raise PluginError(f"tracker {spec.name!r} is already registered by plugin {other!r}")
        self._specs[spec.name] = spec

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[TrackerSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> list[str]:
        return list(self._specs)

    def get(self, name: str) -> TrackerSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownTrackerError(unknown_tracker_message(name, self._specs)) from None


def unknown_tracker_message(name: str, known: Any) -> str:
    """``unknown tracker 'mlflw'; did you mean 'mlflow'?`` (or the list of known names)."""
    known = sorted(known)
    hint = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    msg = f"unknown tracker {name!r}"
    if hint:
        return f"{msg}; did you mean {hint[0]!r}?"
    return f"{msg}; known: {', '.join(known) or '(none installed)'}"


class TrackerRegistrar:
    """Collects one plugin's trackers; malformed registrations become ``problems``."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.specs: list[TrackerSpec] = []
        self.problems: list[str] = []

    def tracker(self, name: str, factory: Callable[..., Any], *, description: str = "") -> None:
        """Register one tracker (see :func:`mtrl.plugins.hookspecs.mtrl_register_trackers`)."""
        problem = _check(name, factory, description)
        if problem:
            self.problems.append(f"tracker {name!r}: {problem}")
            return
        self.specs.append(TrackerSpec(name, factory, self.plugin, description))

    __call__ = tracker


def _check(name: Any, factory: Any, description: Any) -> str | None:
    if not isinstance(name, str) or not _NAME.match(name):
        return "name must start with a letter and hold only letters, digits, '_', '.' and '-'"
    if not callable(factory):
        return f"factory must be callable, got {type(factory).__name__}"
    if not isinstance(description, str):
        return f"description must be a string, got {type(description).__name__}"
    try:
        inspect.signature(factory).bind(None, None, None)
    except TypeError:
        return "factory must accept three positional arguments (cfg, run_dir, task_names)"
    except ValueError:
        pass  # no introspectable signature (some builtins): trust it
    return None
