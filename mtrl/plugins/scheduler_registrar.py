"""Scheduling policies offered by plugins: the registrar hooks receive and the registry of all.

The plugin layer stores policies as opaque callables and only checks their shape; what a
policy means (records in, allocation out) is defined in :mod:`mtrl.scheduler`, which imports
this module and never the reverse.
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


class UnknownPolicyError(UserError, KeyError):
    """A scheduling policy name that no loaded plugin registered."""

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0])


@dataclass(frozen=True)
class SchedulerSpec:
    """One allocation policy: ``policy(records, budget) -> Allocation`` and who offers it."""

    name: str
    policy: Callable[..., Any]
    plugin: str
    description: str = ""


class SchedulerRegistry:
    """Policy names of every loaded plugin (one flat namespace, first registration wins)."""

    def __init__(self) -> None:
        self._specs: dict[str, SchedulerSpec] = {}

    def add(self, spec: SchedulerSpec) -> None:
        if spec.name in self._specs:
            other = self._specs[spec.name].plugin
            raise PluginError(
                f"scheduling policy {spec.name!r} is already registered by plugin {other!r}"
            )
        self._specs[spec.name] = spec

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[SchedulerSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> list[str]:
        return list(self._specs)

    def get(self, name: str) -> SchedulerSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownPolicyError(unknown_policy_message(name, self._specs)) from None


def unknown_policy_message(name: str, known: Any) -> str:
    """``unknown scheduling policy 'balanced2'; did you mean 'balanced'?`` (or the list)."""
    known = sorted(known)
    hint = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    msg = f"unknown scheduling policy {name!r}"
    if hint:
        return f"{msg}; did you mean {hint[0]!r}?"
    return f"{msg}; known: {', '.join(known) or '(none)'}"


class SchedulerRegistrar:
    """Collects one plugin's policies; malformed registrations become ``problems``."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.specs: list[SchedulerSpec] = []
        self.problems: list[str] = []

    def policy(self, name: str, policy: Callable[..., Any], *, description: str = "") -> None:
        """Register one policy (see :func:`mtrl.plugins.hookspecs.mtrl_register_schedulers`)."""
        problem = _check(name, policy, description)
        if problem:
            self.problems.append(f"scheduling policy {name!r}: {problem}")
            return
        self.specs.append(SchedulerSpec(name, policy, self.plugin, description))

    __call__ = policy


def _check(name: Any, policy: Any, description: Any) -> str | None:
    if not isinstance(name, str) or not _NAME.match(name):
        return "name must start with a letter and hold only letters, digits, '_', '.' and '-'"
    if not callable(policy):
        return f"policy must be callable, got {type(policy).__name__}"
    if not isinstance(description, str):
        return f"description must be a string, got {type(description).__name__}"
    try:
        inspect.signature(policy).bind(None, None)
    except TypeError:
        return "policy must accept two positional arguments (records, budget)"
    except ValueError:
        pass  # no introspectable signature (some builtins): trust it
    return None
