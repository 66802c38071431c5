"""Built-in plugin: envpool environments (placeholder until its backend lands)."""

from __future__ import annotations

from typing import Any

from mtrl.errors import PluginUnavailable
from mtrl.plugins import hookimpl


@hookimpl
def mtrl_register_envs(register: Any) -> None:
    raise PluginUnavailable("envpool backend not implemented yet")
