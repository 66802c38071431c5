"""The slow-link harness (mtrl.testing.slow_links) adds the delay and keeps the rate its link
says, leaves nothing behind, and carries real learner replicas: two ``mtrl train`` nodes in
two namespaces over a 20 ms link, where ``local_sgd`` sends a fraction of ``allreduce``'s
bytes per update (the short form of benchmarks/slow_sync.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mtrl.testing.cpu_limit import CpuLimit
from mtrl.testing.cpu_limit import unavailable as cpu_unavailable
from mtrl.testing.slow_links import Link, SlowNetwork, unavailable

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(unavailable() is not None, reason=f"slow links: {unavailable()}"),
    pytest.mark.timeout(600),
]

PROBE = r"""
import socket, sys, time
role, host, nbytes = sys.argv[1], sys.argv[2], int(sys.argv[3])
if role == "server":
    s = socket.socket()
    s.bind((host, 7000))
    s.listen(1)
    c, _ = s.accept()
    while True:
        d = c.recv(1 << 20)
        if not d:
            break
        if d == b"p":
            c.sendall(b"q")
    c.sendall(b"done")
    sys.exit(0)
for _ in range(600):  # the server's namespace may still be starting: wait for it
    try:
        c = socket.create_connection((host, 7000))
        break
    except OSError:
        time.sleep(0.05)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtts = []
for _ in range(9):
    t = time.perf_counter()
    c.sendall(b"p")
    c.recv(1)
    rtts.append(time.perf_counter() - t)
buf, sent, t = b"x" * (1 << 16), 0, time.perf_counter()
while sent < nbytes:
    c.sendall(buf)
    sent += len(buf)
c.shutdown(socket.SHUT_WR)
c.recv(4)
print(sorted(rtts)[4], sent * 8 / (time.perf_counter() - t) / 1e6)
"""


def _probe(net: SlowNetwork, nbytes: int) -> tuple[float, float]:
    """(median round trip in s, bulk rate in Mbit/s) from host 0 to host 1."""
    server = subprocess.Popen(
        net.run(1, [sys.executable, "-c", PROBE, "server", net.addresses[1], "0"])
    )
    try:
        out = subprocess.run(
            net.run(0, [sys.executable, "-c", PROBE, "client", net.addresses[1], str(nbytes)]),
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    finally:
        server.wait(timeout=60)
    rtt, mbit = map(float, out.stdout.split())
    return rtt, mbit


def _ours() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.startswith(f"mtrl{os.getpid()}")]


def test_a_delayed_link_adds_its_delay_and_holds_its_rate() -> None:
    with SlowNetwork(2, Link(delay_ms=20, rate_mbit=40)) as net:
        rtt, mbit = _probe(net, 6 << 20)
        sent = net.tx_bytes(0)
        assert net.forwarded > 0
    assert rtt >= 0.040, "every packet waits 20 ms each way"
    assert rtt < 1.0
    assert mbit <= 40 * 1.1, "the token bucket holds the sender to its rate"
    assert sent >= 6 << 20  # the device counted what went over it
    assert not _ours()


def test_an_undelayed_link_is_a_veth_pair_with_its_rate() -> None:
    with SlowNetwork(2, Link(rate_mbit=40)) as net:
        rtt, mbit = _probe(net, 6 << 20)
    assert rtt < 0.020  # no router in the way
    assert mbit <= 40 * 1.1
    assert not _ours()


def test_every_namespace_goes_even_when_the_body_raises() -> None:
    with pytest.raises(RuntimeError, match="body"), SlowNetwork(3, Link(delay_ms=5)) as net:
        assert len(_ours()) == 3
        assert net.addresses == ["10.77.0.1", "10.77.0.2", "10.77.0.3"]
        raise RuntimeError("body")
    assert not _ours()
    with pytest.raises(ValueError, match="2 to 200 hosts"):
        SlowNetwork(1, Link())


def _config(tmp_path: Path, sync: str) -> Path:
    cfg = tmp_path / f"{sync}.yaml"
    cfg.write_text(
        f"""
name: {sync}
total_env_steps: 6000
tasks: [{{env: gymnasium/CartPole-v1, num_envs: 8}}]
actors: {{mode: serial}}
learner: {{model: {{encoder_dim: 64, torso: [64]}}, batch_size: 8,
          parallel: {{sync: {sync}, sync_every: 8}}}}
checkpoint: {{enabled: false}}
tracking: {{run_dir: {tmp_path / sync}, log_every_s: 1, console: plain,
            wandb: {{mode: disabled}}}}
"""
    )
    return cfg


def _train_over(net: SlowNetwork, cfg: Path) -> dict[str, float]:
    """Two replicas, one per host; returns rank 0's last metrics and host 0's bytes sent."""
    before = net.tx_bytes(0)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for cmd in net.torchrun(["-m", "mtrl.cli", "train", str(cfg)])
    ]
    outs = [p.communicate(timeout=540)[0] for p in procs]
    for p, out in zip(procs, outs, strict=True):
        assert p.returncode == 0, out[-3000:]
    (run_dir,) = (cfg.parent / cfg.stem).iterdir()
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    return {**last, "tx_bytes": net.tx_bytes(0) - before}


def test_local_sgd_sends_a_fraction_of_allreduces_bytes_over_a_slow_link(tmp_path: Path) -> None:
    with SlowNetwork(2, Link(delay_ms=20, rate_mbit=100)) as net:
        reduced = _train_over(net, _config(tmp_path, "allreduce"))
        local = _train_over(net, _config(tmp_path, "local_sgd"))
    for run in (reduced, local):
        assert run["charts/env_steps"] >= 6000
    per_update = {
        name: run["tx_bytes"] / run["charts/updates"]
        for name, run in (("allreduce", reduced), ("local_sgd", local))
    }
    # Every 8 updates against every update: well under a third, the joint decisions included.
    assert per_update["local_sgd"] < per_update["allreduce"] / 3, per_update


SPIN = r"""
import time
w, c = time.perf_counter(), time.process_time()
while time.perf_counter() - w < 2.0:
    pass
print((time.process_time() - c) / (time.perf_counter() - w))
"""


@pytest.mark.skipif(cpu_unavailable() is not None, reason=f"CPU limit: {cpu_unavailable()}")
def test_a_straggler_is_held_to_its_share_of_a_core() -> None:
    with CpuLimit(cores=0.2) as limit:
        out = subprocess.run(
            limit.wrap([sys.executable, "-c", SPIN]), capture_output=True, text=True, check=True
        )
        path = limit.path
    assert float(out.stdout) <= 0.3  # 0.2 of a core, whatever else the machine runs
    assert not path.exists(), "the group goes with the limit"
