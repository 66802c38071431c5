"""Shared test setup: offline wandb, a clean plugin environment, a fresh plugin cache."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
for var in ("MTRL_DISABLE_PLUGIN_AUTOLOAD", "MTRL_PLUGINS", "MTRL_DISABLE_PLUGINS"):
    os.environ.pop(var, None)


@pytest.fixture
def fresh_plugins() -> Iterator[None]:
    """Forget the cached plugin set before and after a test that changes plugin env vars."""
    from mtrl.plugins import reset_plugins

    reset_plugins()
    yield
    reset_plugins()
