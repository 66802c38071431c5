"""Who may speak on a coupling socket: CURVE over tcp://, the loopback rule, 0700 ipc dirs."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq

from mtrl.coupling import curve
from mtrl.coupling import protocol as P
from mtrl.errors import EnvKwargsError
from mtrl.plugins.external import ExternalSim, SimulationDisconnected, SimulationTimeout
from mtrl.plugins.external.link import Link
from tests.external.conftest import HERE, PY_SIM

DRIFT = str(HERE / "drift_sim.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _steps(env, n: int = 3) -> np.ndarray:
    env.reset()
    for _ in range(n):
        b = env.step(np.zeros((env.num_envs, 1), np.float32))
    return b.obs


def _mechanism(env) -> int:
    return env._links[0].sock.getsockopt(zmq.MECHANISM)


def test_the_bundled_libzmq_has_curve() -> None:
    assert curve.available(), "pyzmq's wheel bundles libzmq with libsodium (CURVE)"


@pytest.mark.parametrize("client", ["python", "c"])
def test_codes_launched_over_tcp_speak_curve(client: str, request) -> None:
    command = (
        PY_SIM if client == "python" else f"{request.getfixturevalue('c_drift_sim')} {{address}}"
    )
    with ExternalSim(command=command, transport="tcp")(num_envs=2, seed=0) as env:
        assert env._links[0].address.startswith("tcp://127.0.0.1:")
        assert _mechanism(env) == zmq.CURVE
        assert _steps(env).shape == (2, 2)


def test_insecure_launches_tcp_codes_plain() -> None:
    with ExternalSim(command=PY_SIM, transport="tcp", insecure=True)(num_envs=1, seed=0) as env:
        assert _mechanism(env) == zmq.NULL
        _steps(env)


def _impostor(address: str, secret: str | None, got: list, stop: threading.Event) -> None:
    """A peer at ``address`` (plain, or a CURVE server with ``secret``) that records what it
    receives and answers every request with a well-formed HELLO reply."""
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    if secret is not None:
        curve.set_server(sock, secret)
    sock.connect(address)
    spec = P.spec_json({"shape": [2]}, {"shape": [1]})
    try:
        while not stop.is_set():
            if sock.poll(20):
                head = P.Header.unpack(sock.recv_multipart()[0])
                got.append(head)
                sock.send_multipart([P.Header(P.HELLO, head.seq, head.count).pack(), spec])
    finally:
        sock.close()


@pytest.mark.parametrize("impostor_key", ["none", "wrong"])
def test_a_peer_without_the_simulations_secret_key_gets_nothing(impostor_key: str) -> None:
    """A link bound on tcp:// for a launched code: a plain peer or one with another key pair
    connects first; it never receives the HELLO, and the real code then gets it."""
    public, secret = curve.keypair()
    ctx = zmq.Context()
    link = Link(ctx, "tcp://127.0.0.1:*", bind=True, label="t", heartbeat_s=1.0, server_key=public)
    address = link.sock.getsockopt_string(zmq.LAST_ENDPOINT)
    stop, got_bad, got_good = threading.Event(), [], []
    good = None
    bad_secret = None if impostor_key == "none" else curve.keypair()[1]
    bad = threading.Thread(target=_impostor, args=(address, bad_secret, got_bad, stop))
    bad.start()
    try:
        with pytest.raises(SimulationTimeout, match=r"never connected.*failed the security"):
            link.send(P.HELLO, [], deadline=time.monotonic() + 1.5, timeout_s=1.5, count=1)
        assert got_bad == [], "the impostor received a request"
        good = threading.Thread(target=_impostor, args=(address, secret, got_good, stop))
        good.start()
        seq = link.send(P.HELLO, [], deadline=time.monotonic() + 60, timeout_s=60, count=1)
        head, _ = link.recv(seq, deadline=time.monotonic() + 60, timeout_s=60, what="HELLO")
        assert head.op == P.HELLO and len(got_good) == 1 and got_bad == []
    finally:
        stop.set()
        bad.join()
        if good is not None:
            good.join()
        link.close()
        ctx.destroy(linger=0)


@contextlib.contextmanager
def _serving(address: str, secret: str | None) -> Iterator[None]:
    """The Python drift simulation bound at ``address`` (a CURVE server with ``secret``);
    the block must end it (CLOSE)."""
    env = curve.launch_env(os.environ, secret, curve.DEFAULT_MAX_MESSAGE_BYTES)
    sim = subprocess.Popen([sys.executable, DRIFT, address, "--bind"], env=env)
    try:
        yield
        assert sim.wait(timeout=20) == 0, "CLOSE ends the simulation"
    finally:
        if sim.poll() is None:
            sim.kill()


def _attach(address: str, **env_kwargs) -> int:
    """Attach, step, close; the link's security mechanism."""
    env = ExternalSim(address=address, start_timeout_s=30)(1, 0, **env_kwargs)
    try:
        _steps(env)
        return _mechanism(env)
    finally:
        env.close()


def test_attach_with_the_simulations_public_key_and_not_without_it() -> None:
    """A wrong key and a plain trainer fail the handshake with a message, and the simulation,
    which ignores such knocks, then serves the trainer with the right key."""
    public, secret = curve.keypair()
    address = f"tcp://127.0.0.1:{_free_port()}"
    with _serving(address, secret):
        wrong = curve.keypair()[0]
        for key in (wrong, None):  # None: plain (allowed on loopback) meets a CURVE server
            with pytest.raises(SimulationDisconnected, match=r"security handshake .* failed"):
                ExternalSim(address=address, server_key=key, start_timeout_s=30)(1, 0)
        assert _attach(address, server_key=public) == zmq.CURVE


def test_plain_tcp_to_a_non_loopback_address_needs_insecure() -> None:
    port = _free_port()
    with pytest.raises(EnvKwargsError, match=r"not a loopback address.*server_key.*insecure: true"):
        ExternalSim(address=f"tcp://10.255.0.1:{port}")(1, 0)  # refused before any connect
    # 0.0.0.0 is not a loopback address, yet a connect to it reaches this machine only
    with _serving(f"tcp://127.0.0.1:{port}", None):
        with pytest.raises(EnvKwargsError, match="insecure"):
            ExternalSim(address=f"tcp://0.0.0.0:{port}")(1, 0)
        assert _attach(f"tcp://0.0.0.0:{port}", insecure=True) == zmq.NULL


@pytest.mark.parametrize(
    "address", ["tcp://10.255.0.1:5555", "tcp://*:5555", "tcp://example.org:5555"]
)
def test_the_python_client_refuses_plain_tcp_off_loopback(address: str, monkeypatch) -> None:
    from mtrl.coupling import client

    monkeypatch.delenv(curve.SECRET_KEY_ENV, raising=False)
    monkeypatch.delenv(curve.INSECURE_ENV, raising=False)
    with pytest.raises(curve.TransportError, match=r"not a loopback.*MTRL_COUPLING_INSECURE=1"):
        client.serve(object(), address, bind=address.startswith("tcp://*"))  # type: ignore[arg-type]


def test_the_c_client_refuses_plain_tcp_off_loopback_and_a_bad_key(c_drift_sim) -> None:
    env = {k: v for k, v in os.environ.items() if k != curve.SECRET_KEY_ENV}
    run = subprocess.run(
        [str(c_drift_sim), "tcp://10.255.0.1:5555"], env=env, capture_output=True, text=True
    )
    assert run.returncode != 0
    assert "not loopback" in run.stderr and "MTRL_COUPLING_INSECURE=1" in run.stderr
    env[curve.SECRET_KEY_ENV] = "too-short"
    run = subprocess.run(
        [str(c_drift_sim), "tcp://127.0.0.1:5555"], env=env, capture_output=True, text=True
    )
    assert run.returncode != 0 and "40 characters of Z85" in run.stderr


def test_loopback_rule() -> None:
    for a in ("tcp://127.0.0.1:1", "tcp://127.3.4.5:1", "tcp://localhost:1", "tcp://[::1]:1"):
        assert curve.is_loopback(a), a
    assert curve.is_loopback("ipc:///tmp/x.sock") and curve.is_loopback("tcp://eth0;127.0.0.1:1")
    for a in ("tcp://0.0.0.0:1", "tcp://*:1", "tcp://10.0.0.1:1", "tcp://host:1", "tcp://[::]:1"):
        assert not curve.is_loopback(a), a


def test_ipc_socket_directories_are_the_owners_alone() -> None:
    with ExternalSim(command=PY_SIM, copies_per_process=1)(num_envs=2, seed=0) as env:
        for link in env._links:
            assert link.address.startswith("ipc://")
            folder = Path(link.address[len("ipc://") :]).parent
            info = folder.stat()
            assert stat.S_IMODE(info.st_mode) == 0o700, oct(info.st_mode)
            assert info.st_uid == os.getuid()
