"""Built-in plugin: pettingzoo environments (placeholder until its backend lands)."""

from __future__ import annotations

from typing import Any

from mtrl.errors import PluginUnavailable
from mtrl.plugins import hookimpl


@hookimpl
def mtrl_register_envs(register: Any) -> None:
    raise PluginUnavailable("pettingzoo backend not implemented yet")
