"""The settings an embedded Ray (``actors.mode: ray`` without a cluster address) starts with:
reachable on loopback only, and authenticated with a token of the run's own.

* **Loopback.** Ray 2.60 replaces ``_node_ip_address="127.0.0.1"`` by the machine's own
  address (``services.resolve_ip_for_localhost``), found by probing an outside address, and
  then listens on every interface — unless Ray runs machine-local, a switch
  (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``) it reads when imported. It is set for the processes
  the start spawns (they inherit the environment) and on the imported constant, and restored
  after the start.
* **Token.** A new Ray cluster requires a token by default, and ``ray.init`` writes one to
  ``~/.ray/auth_token`` when there is none — a file that later makes a hand-started ``ray start
  --head`` require it too, while ``ray start --address`` on the workers does not send it (they
  fail with ``InvalidAuthToken``). Unless ``RAY_AUTH_MODE`` is set, the embedded Ray gets a
  random token in this process's environment instead (its processes inherit it): nothing is
  written, and Ray's warning about the default is not printed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from typing import Any

LOOPBACK = "127.0.0.1"
_LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@contextlib.contextmanager
def embedded_start(ray: Any) -> Iterator[dict[str, Any]]:
    """Around ``ray.init`` of an embedded Ray; yields the extra ``ray.init`` arguments."""
    _own_token()
    constants = ray._private.ray_constants
    saved_env, saved_const = os.environ.get(_LOCAL_ONLY_ENV), constants.ENABLE_RAY_CLUSTER
    os.environ[_LOCAL_ONLY_ENV] = "0"
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield {"_node_ip_address": LOOPBACK}
    finally:
        constants.ENABLE_RAY_CLUSTER = saved_const
        if saved_env is None:
            os.environ.pop(_LOCAL_ONLY_ENV, None)
        else:
            os.environ[_LOCAL_ONLY_ENV] = saved_env


def _own_token() -> None:
    """Token authentication with a random token in the environment, unless the user chose a
    mode (``RAY_AUTH_MODE``); Ray's configuration is re-read so this process sends it."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    if not (os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")):
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    from ray._raylet import Config

    Config.initialize("")  # as Ray does when it turns token mode on itself
