"""The built-in scheduling policies, registered through the same hook as any third party."""

from __future__ import annotations

from mtrl.plugins.hookspecs import hookimpl
from mtrl.plugins.scheduler_registrar import SchedulerRegistrar
from mtrl.scheduler.policies import BUILTIN


@hookimpl
def mtrl_register_schedulers(register: SchedulerRegistrar) -> None:
    """Offer ``fixed``, ``balanced`` and ``progress`` (see :mod:`mtrl.scheduler.policies`)."""
    for name, (policy, description) in BUILTIN.items():
        register.policy(name, policy, description=description)
