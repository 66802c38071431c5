"""Who may speak on a coupling socket: CURVE keys, the loopback rule and the size bound.

Over ``tcp://`` the coupling is authenticated and encrypted with ZeroMQ's CURVE mechanism
(CurveZMQ: Curve25519 keys, libsodium). The roles never change with who binds: the
**simulation is the CURVE server** (it holds a secret key) and **mtrl is the CURVE client**
(it knows the simulation's public key and makes a key pair of its own for each connection).
A peer that does not hold the secret key of the public key mtrl expects cannot complete the
handshake, so mtrl never exchanges a byte with it.

* Launched codes: mtrl makes a key pair per simulation process and hands the secret key to the
  command in the environment variable ``MTRL_CURVE_SECRET_KEY``; the client libraries (Python
  and C) read it and become the CURVE server.
* Attached codes: the operator makes a key pair (``python -m mtrl.coupling.curve``), starts the
  simulation with ``MTRL_CURVE_SECRET_KEY`` set, and gives mtrl the public key
  (``ExternalSim(server_key=...)`` or ``env_kwargs: {server_key: ...}``).

Plain ``tcp://`` to an address that is not loopback is refused unless the config says
``insecure: true`` (and, on the simulation side, ``MTRL_COUPLING_INSECURE=1``). ``ipc://``
sockets live in a directory only their owner can enter (mode 0700), so they need no keys.

Every socket also sets ``ZMQ_MAXMSGSIZE``: libzmq drops a connection whose peer announces a
frame larger than that before allocating it. A leaf module: pyzmq only.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Mapping
from typing import Any

#: The simulation's secret key (Z85, 40 characters): set, the client libraries serve CURVE.
SECRET_KEY_ENV = "MTRL_CURVE_SECRET_KEY"
#: ``1`` lets a simulation use plain tcp:// on a non-loopback address.
INSECURE_ENV = "MTRL_COUPLING_INSECURE"
#: The largest frame a socket accepts (bytes); mtrl hands its own bound to launched codes.
MAX_MESSAGE_ENV = "MTRL_MAX_MESSAGE_BYTES"
#: Default of that bound: 64 MiB per frame.
DEFAULT_MAX_MESSAGE_BYTES = 64 << 20


class TransportError(ValueError):
    """A socket that must not be opened as configured (no CURVE where it is needed, a bad key)."""


def available() -> bool:
    """Whether the libzmq under pyzmq supports CURVE."""
    import zmq

    return bool(zmq.has("curve"))


def keypair() -> tuple[str, str]:
    """A fresh ``(public, secret)`` CURVE key pair, Z85 text of 40 characters each."""
    import zmq

    if not available():
        raise TransportError(
            f"the libzmq under pyzmq ({zmq.zmq_version()}) was built without CURVE: install a "
            "pyzmq wheel (they bundle libzmq with libsodium) or use ipc://"
        )
    public, secret = zmq.curve_keypair()
    return public.decode(), secret.decode()


def check_key(key: str, what: str) -> bytes:
    """``key`` as the bytes libzmq takes; :class:`TransportError` when it is not a Z85 key."""
    from zmq.utils import z85

    text = key.strip()
    try:
        ok = len(text) == 40 and len(z85.decode(text)) == 32
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise TransportError(
            f"{what} must be a CURVE key: 40 characters of Z85 text "
            "(`python -m mtrl.coupling.curve` makes a key pair)"
        )
    return text.encode()


def is_loopback(address: str) -> bool:
    """Whether a ``tcp://`` address names this machine only (127.0.0.0/8, ::1, localhost).

    Other transports count as local (ipc, inproc); a host name other than ``localhost`` or a
    wildcard (``*``, ``0.0.0.0``) does not."""
    if not address.startswith("tcp://"):
        return True
    rest = address[len("tcp://") :].rsplit(";", 1)[-1]  # "source;destination"
    host = rest.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plain_problem(address: str) -> str | None:
    """Why plain (unencrypted) use of ``address`` is refused, or None when it is allowed."""
    if is_loopback(address):
        return None
    return (
        f"plain tcp:// to {address}, which is not a loopback address, would let anyone who "
        "reaches it read and drive the simulation"
    )


def set_limit(sock: Any, max_message_bytes: int) -> None:
    """Make libzmq refuse any frame over ``max_message_bytes`` before allocating it."""
    import zmq

    sock.setsockopt(zmq.MAXMSGSIZE, int(max_message_bytes))


def set_client(sock: Any, server_key: str) -> None:
    """Make ``sock`` a CURVE client that only talks to the holder of ``server_key``'s secret
    (mtrl's side); its own key pair is made here, for this socket only."""
    server = check_key(server_key, "the simulation's public key (server_key)")
    public, secret = keypair()
    sock.curve_serverkey = server
    sock.curve_publickey = public.encode()
    sock.curve_secretkey = secret.encode()


def set_server(sock: Any, secret_key: str) -> None:
    """Make ``sock`` a CURVE server with ``secret_key`` (the simulation's side)."""
    secret = check_key(secret_key, SECRET_KEY_ENV)
    if not available():
        keypair()  # raises with the reason
    sock.curve_server = True
    sock.curve_secretkey = secret


def simulation_side(sock: Any, address: str) -> str:
    """Secure a simulation's socket from its environment; returns ``"curve"`` or ``"plain"``.

    ``MTRL_CURVE_SECRET_KEY`` set: a CURVE server with that key. Unset: plain, which is refused
    (:class:`TransportError`) on a non-loopback tcp:// address unless
    ``MTRL_COUPLING_INSECURE=1``. ``MTRL_MAX_MESSAGE_BYTES`` bounds every frame (default
    :data:`DEFAULT_MAX_MESSAGE_BYTES`)."""
    set_limit(sock, int(os.environ.get(MAX_MESSAGE_ENV) or DEFAULT_MAX_MESSAGE_BYTES))
    secret = os.environ.get(SECRET_KEY_ENV)
    if secret:
        set_server(sock, secret)
        return "curve"
    problem = plain_problem(address)
    if problem and os.environ.get(INSECURE_ENV) != "1":
        raise TransportError(
            f"{problem}: set {SECRET_KEY_ENV} (`python -m mtrl.coupling.curve` makes a key "
            f"pair; mtrl takes the public key as server_key), or {INSECURE_ENV}=1 on a "
            "network you trust"
        )
    return "plain"


def launch_env(
    base: Mapping[str, str], secret_key: str | None, max_message_bytes: int
) -> dict[str, str]:
    """The environment of a launched code: ``base`` with the secret key mtrl made for it (or
    none: an inherited one is removed, so that a plain link meets a plain code) and the size
    bound."""
    env = {k: v for k, v in base.items() if k != SECRET_KEY_ENV}
    if secret_key is not None:
        env[SECRET_KEY_ENV] = secret_key
    env[MAX_MESSAGE_ENV] = str(int(max_message_bytes))
    return env


def public_key(secret_key: str) -> str:
    """The public key of a secret key."""
    import zmq

    return zmq.curve_public(check_key(secret_key, "the secret key")).decode()


def main() -> int:
    """Print a new key pair: the secret for the simulation, the public key for mtrl."""
    public, secret = keypair()
    print(f"{SECRET_KEY_ENV}={secret}")
    print(f"# public key (ExternalSim(server_key=...) or env_kwargs server_key): {public}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "INSECURE_ENV",
    "MAX_MESSAGE_ENV",
    "SECRET_KEY_ENV",
    "TransportError",
    "available",
    "check_key",
    "is_loopback",
    "keypair",
    "launch_env",
    "plain_problem",
    "public_key",
    "set_client",
    "set_limit",
    "set_server",
    "simulation_side",
]
