"""pytest plugin (entry point ``pytest11: mtrl``) offering the conformance suite as a fixture."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def mtrl_check_env() -> Callable[..., Any]:
    """``mtrl_check_env(env_id, **options)``: run mtrl's env conformance suite on one env."""
    from mtrl.testing.conformance import check_env

    return check_env
