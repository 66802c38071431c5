"""Joining a Ray cluster someone started (``actors.ray.address`` or ``RAY_ADDRESS``), with the
failures said in one line: nothing listening there, or the cluster refusing this process's
authentication token.

Ray 2.60 clusters can require a token (``RAY_AUTH_MODE=token``; docs/DISTRIBUTED.md, "Securing
a multi-node cluster"). A driver without the right token is refused by the cluster's GCS, and
``ray.init`` retries for ~20 s, printing one warning a second, then raises a ``ConnectionError``
that does not say why. So before ``ray.init`` one connection is tried (its warning silenced):
a refusal is reported at once, naming authentication and what to set.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Iterator
from typing import Any

from mtrl.errors import UserError

#: How long the first TCP connection to the cluster's GCS may take.
CONNECT_TIMEOUT_S = 5.0

AUTH_FIX = (
    "on every node and before `mtrl train`, export RAY_AUTH_MODE=token and the cluster's "
    "token: RAY_AUTH_TOKEN=<token>, RAY_AUTH_TOKEN_PATH=<file>, or the file ~/.ray/auth_token "
    "(`ray get-auth-token` on the head prints it); docs/DISTRIBUTED.md, "
    '"Securing a multi-node cluster"'
)


def join(ray: Any, address: str, source: str, **init_kwargs: Any) -> None:
    """``ray.init(address=address)``, or a :class:`UserError` naming ``source`` (the config
    field or environment variable that gave the address) and the cause."""
    host_port = _host_port(address)
    if host_port is not None:
        _reachable(*host_port, address, source)
        _authenticated(address, source)
    try:
        ray.init(address=address, **init_kwargs)
    except (ConnectionError, RuntimeError, ValueError) as e:
        if is_auth_error(e):
            raise UserError(auth_message(address, source, e)) from None
        raise UserError(f"{source}: cannot join the Ray cluster at {address!r}: {e}") from None
    except Exception as e:
        if is_auth_error(e):  # ray.exceptions.AuthenticationError: no token found here
            raise UserError(auth_message(address, source, e)) from None
        raise


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port`` address (None: ``auto``, ``ray://``, ...)."""
    if "://" in address or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _reachable(host: str, port: int, address: str, source: str) -> None:
    """A TCP connection to the GCS, or a :class:`UserError` (ray.init would retry for
    minutes)."""
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as e:
        raise UserError(
            f"{source}: cannot join the Ray cluster at {address!r}: nothing accepts "
            f"connections there ({e.strerror or e}); start its head (`ray start --head "
            f"--port={port}`) or correct the address"
        ) from None


def _authenticated(address: str, source: str) -> None:
    """One request to the GCS (Ray's own client, its warnings silenced); a refused token is a
    :class:`UserError`. Anything else is left to ``ray.init`` to report."""
    try:
        from ray._raylet import GcsClient
    except ImportError:  # another Ray: ray.init's own errors
        return
    try:
        with _quiet_stderr():
            GcsClient(address=address)
    except Exception as e:
        if is_auth_error(e):
            raise UserError(auth_message(address, source, e)) from None


def is_auth_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is Ray refusing or missing a token."""
    seen: BaseException | None = exc
    while seen is not None:
        text = f"{type(seen).__name__}: {seen}"
        if "AuthenticationError" in text or "InvalidAuthToken" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def auth_message(address: str, source: str, exc: BaseException) -> str:
    """The one line a token problem gets: which of the three causes, and :data:`AUTH_FIX`."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        why = "RAY_AUTH_MODE is not 'token' here, so no token was sent"
    elif "no authentication token was found" in str(exc):
        why = "RAY_AUTH_MODE=token but no token was found here"
    else:
        why = "the token sent is not the cluster's"
    return (
        f"{source}: the Ray cluster at {address!r} requires token authentication and refused "
        f"this process ({why}): {AUTH_FIX}"
    )


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null (Ray's C++ client logs there, not through Python)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
