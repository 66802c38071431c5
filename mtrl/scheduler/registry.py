"""Policy lookup by name, with every allocation checked against the policy contract.

Policies come from the plugin registry (built-ins included, see :mod:`mtrl.scheduler.builtin`).
A third-party policy that returns a malformed allocation is reported by name and plugin instead
of corrupting the actor pool.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mtrl.errors import PluginError
from mtrl.scheduler.records import Allocation, Budget, TaskRecord

if TYPE_CHECKING:
    from mtrl.plugins import Plugins
    from mtrl.plugins.scheduler_registrar import SchedulerSpec


def _plugins(plugins: Plugins | None) -> Plugins:
    if plugins is not None:
        return plugins
    from mtrl.plugins import get_plugins  # lazy: loading plugins imports every backend

    return get_plugins()


def policy_names(plugins: Plugins | None = None) -> list[str]:
    """Names a config may give as ``scheduler.policy`` (the process-wide plugins by default)."""
    return _plugins(plugins).schedulers.names()


def allocation_problems(alloc: Any, records: Sequence[TaskRecord], budget: Budget) -> list[str]:
    """How ``alloc`` breaks the contract of ``mtrl_register_schedulers`` (empty if it does not)."""
    if not isinstance(alloc, Mapping):
        return [f"returned {type(alloc).__name__}, not an Allocation (task name -> actors)"]
    names = [r.name for r in records]
    problems = []
    if set(alloc) != set(names):
        missing, extra = set(names) - set(alloc), set(alloc) - set(names)
        problems.append(f"tasks must match the records (missing {missing}, unknown {extra})")
        return problems
    bad = [n for n in names if not isinstance(alloc[n], numbers.Integral) or alloc[n] < 0]
    if bad:
        return [f"actor counts must be non-negative integers: {', '.join(bad)}"]
    active = [r for r in records if not r.quarantined]
    total = sum(alloc[n] for n in names)
    expected = budget.slots if active else 0
    if total != expected:
        problems.append(f"allocated {total} actors, the budget is {expected}")
    floor = min(budget.min_per_task, budget.slots // max(len(active), 1))
    if starved := [r.name for r in active if alloc[r.name] < floor]:
        problems.append(f"below the floor of {floor}: {', '.join(starved)}")
    if fed := [r.name for r in records if r.quarantined and alloc[r.name] != 0]:
        problems.append(f"quarantined tasks must get 0: {', '.join(fed)}")
    shares = getattr(alloc, "shares", None) or {}
    if unknown := sorted(set(shares) - set(names)):
        problems.append(f"shares name unknown tasks: {', '.join(unknown)}")
    bad_shares = [
        n
        for n, v in shares.items()
        if not isinstance(v, numbers.Real) or not math.isfinite(v) or v < 0
    ]
    if bad_shares:
        problems.append(f"shares must be finite and >= 0: {', '.join(sorted(bad_shares))}")
    return problems


class CheckedPolicy:
    """A registered policy whose every allocation is checked; errors name policy and plugin."""

    def __init__(self, spec: SchedulerSpec) -> None:
        self.spec = spec
        self.__wrapped__ = spec.policy

    def __call__(self, records: Sequence[TaskRecord], budget: Budget) -> Allocation:
        alloc = self.spec.policy(records, budget)
        problems = allocation_problems(alloc, records, budget)
        if problems:
            raise PluginError(
                f"scheduling policy {self.spec.name!r} of plugin {self.spec.plugin!r} broke its "
                f"contract: {'; '.join(problems)}"
            )
        if isinstance(alloc, Allocation):
            return alloc
        return Allocation({name: int(n) for name, n in alloc.items()})

    def __repr__(self) -> str:
        return f"CheckedPolicy({self.spec.name!r} from {self.spec.plugin!r})"


def get_policy(name: str, plugins: Plugins | None = None) -> CheckedPolicy:
    """The policy registered as ``name``; raises ``UnknownPolicyError`` with a did-you-mean."""
    return CheckedPolicy(_plugins(plugins).schedulers.get(name))
