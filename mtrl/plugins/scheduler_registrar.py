"""Scheduling policies offered by plugins: the registrar hooks receive and the registry of all.

What a policy means (records in, allocation out) is defined in :mod:`mtrl.scheduler`; the
shared mechanics are :mod:`mtrl.plugins.named_registry`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mtrl.errors import UnknownNameError
from mtrl.plugins.named_registry import NamedRegistrar, NamedRegistry


class UnknownPolicyError(UnknownNameError):
    """A scheduling policy name that no loaded plugin registered."""


@dataclass(frozen=True)
class SchedulerSpec:
    """One allocation policy: ``policy(records, budget) -> Allocation`` and who offers it."""

    name: str
    policy: Callable[..., Any]
    plugin: str
    description: str = ""


class SchedulerRegistry(NamedRegistry[SchedulerSpec]):
    """Policy names of every loaded plugin (one flat namespace, first registration wins)."""

    noun = "scheduling policy"
    unknown_error = UnknownPolicyError


class SchedulerRegistrar(NamedRegistrar[SchedulerSpec]):
    """Collects one plugin's policies; malformed registrations become ``problems``."""

    noun = "scheduling policy"
    what = "policy"
    arguments = ("records", "budget")

    def make_spec(self, name: str, obj: Callable[..., Any], description: str) -> SchedulerSpec:
        return SchedulerSpec(name, obj, self.plugin, description)

    def policy(self, name: str, policy: Callable[..., Any], *, description: str = "") -> None:
        """Register one policy (see :func:`mtrl.plugins.hookspecs.mtrl_register_schedulers`)."""
        self._register(name, policy, description)

    __call__ = policy
