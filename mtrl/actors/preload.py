"""Imported once by the ``forkserver`` that actor processes fork from (``start_method:
forkserver``): it loads the worker's imports and the plugin registry, so every actor start or
restart skips them (seconds of importing backends on a busy machine; under 0.1 s forked).

Forked actors see the registry as it was when the forkserver started, which is also the
environment (``MTRL_PLUGINS`` ...) they inherit; spawned actors rebuild it themselves.
"""

from __future__ import annotations

import contextlib

import mtrl.actors.worker  # noqa: F401  (torch, numpy, gymnasium)

with contextlib.suppress(Exception):  # a failure here resurfaces in the actor, with its name
    from mtrl.plugins import get_plugins

    get_plugins()
