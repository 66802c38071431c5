"""Slow links between processes on one machine, for real: each host in its own network
namespace, its upload rate-limited by ``tc``, every IP packet between hosts delayed.

What learner replicas meet across a cluster (20 ms and 100 Mbit between sites; 0.1 ms and
10 Gbit in a rack) is made here from the kernel's own pieces, so that torch.distributed,
torchrun's rendezvous and ZeroMQ run unchanged over it::

    with SlowNetwork(hosts=2, link=Link(delay_ms=20, rate_mbit=100)) as net:
        procs = [subprocess.Popen(net.run(i, cmd)) for i, cmd in enumerate(cmds)]
        ...
        net.tx_bytes(0)   # what host 0 sent over its link

Each host is a named namespace (``ip netns``) with loopback up and one address
``10.77.0.<i+1>/24``; the harness makes and removes every namespace, device and qdisc it uses
(the namespaces also when the body raises), and no address leaves them.

- ``delay_ms == 0``: each host's side of a **veth pair** in its namespace, the other side on a
  bridge in a hub namespace: the kernel forwards at full speed.
- ``delay_ms > 0``: this kernel has no ``netem`` (the qdisc that delays), and a TCP relay
  cannot carry gloo's connections (every rank listens on a port of its own choosing and the
  ranks connect directly) nor keep TCP's real round-trip time (a relay ends each connection
  where it stands, so the sender's window never sees the delay). So each host gets a **TUN
  device** whose other end is this process: a router thread reads every IP packet a host sends
  and writes it into the destination host's device ``delay_ms`` later. TCP then sees the full
  round trip, the bandwidth-delay product included.
- ``rate_mbit``: a ``tbf`` qdisc (token bucket) on each host's egress device, so each host
  sends at most that rate over its link (measured: ``tbf`` and ``htb`` work in this kernel).

Needs root (or CAP_NET_ADMIN), ``ip``, ``tc`` and ``/dev/net/tun`` for delays:
:func:`unavailable` says what is missing.
"""

from __future__ import annotations

import collections
import fcntl
import os
import select
import shutil
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

__all__ = ["Link", "SlowNetwork", "link_bytes", "unavailable"]

SUBNET = "10.77.0"
_TUNSETIFF = 0x400454CA
_IFF_TUN, _IFF_NO_PI = 0x0001, 0x1000
_TUN_MTU = 9000  # fewer packets through the router thread; TCP's segments follow the MTU


@dataclass(frozen=True)
class Link:
    """Each host's link: one-way delay added to every packet, and its upload rate."""

    delay_ms: float = 0.0
    rate_mbit: float | None = None

    def __str__(self) -> str:
        rate = "unlimited" if self.rate_mbit is None else f"{self.rate_mbit:g} Mbit/s"
        return f"{self.delay_ms:g} ms / {rate}"


def unavailable(delay: bool = True) -> str | None:
    """Why this machine cannot build a :class:`SlowNetwork` (None: it can)."""
    if os.geteuid() != 0:
        return "network namespaces and tc need root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` (iproute2) is not installed"
    if delay and not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing: no TUN devices for delayed links"
    return None


def link_bytes(namespace: str, device: str, direction: str) -> int:
    """The kernel's count of bytes ``device`` in ``namespace`` has sent (``direction="tx"``)
    or received (``"rx"``); readable from any process that can enter the namespace (root),
    such as a driver running in another host's namespace."""
    out = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            namespace,
            "cat",
            f"/sys/class/net/{device}/statistics/{direction}_bytes",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return int(out.stdout.strip())


def _sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=60)


class SlowNetwork:
    """``hosts`` network namespaces joined by links of ``link`` (module docstring)."""

    def __init__(self, hosts: int, link: Link, name: str | None = None) -> None:
        if not 2 <= hosts <= 200:
            raise ValueError(f"SlowNetwork needs 2 to 200 hosts, got {hosts}")
        why = unavailable(delay=link.delay_ms > 0)
        if why is not None:
            raise RuntimeError(f"cannot build slow links here: {why}")
        self.hosts = hosts
        self.link = link
        self.name = name or f"mtrl{os.getpid()}"
        self.namespaces = [f"{self.name}-h{i}" for i in range(hosts)]
        self.addresses = [f"{SUBNET}.{i + 1}" for i in range(hosts)]
        self.devices: list[str] = []
        self._made: list[str] = []
        self._router: _DelayRouter | None = None

    # -- building and removing ------------------------------------------------------------

    def __enter__(self) -> SlowNetwork:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _netns(self, name: str) -> None:
        _sh("ip", "netns", "add", name)
        self._made.append(name)
        _sh("ip", "-n", name, "link", "set", "lo", "up")

    def _build(self) -> None:
        for ns in self.namespaces:
            self._netns(ns)
        if self.link.delay_ms > 0:
            self._build_tun()
        else:
            self._build_bridge()
        if self.link.rate_mbit is not None:
            for ns, dev in zip(self.namespaces, self.devices, strict=True):
                self._limit(ns, dev)

    def _build_bridge(self) -> None:
        hub = f"{self.name}-hub"
        self._netns(hub)
        _sh("ip", "-n", hub, "link", "add", "br0", "type", "bridge")
        _sh("ip", "-n", hub, "link", "set", "br0", "up")
        for i, ns in enumerate(self.namespaces):
            inner, outer = "eth0", f"{self.name[:6]}v{i}"
            _sh("ip", "link", "add", outer, "type", "veth", "peer", "name", f"{outer}p")
            _sh("ip", "link", "set", f"{outer}p", "netns", ns)
            _sh("ip", "-n", ns, "link", "set", f"{outer}p", "name", inner)
            _sh("ip", "link", "set", outer, "netns", hub)
            _sh("ip", "-n", hub, "link", "set", outer, "master", "br0", "up")
            _sh("ip", "-n", ns, "addr", "add", f"{self.addresses[i]}/24", "dev", inner)
            _sh("ip", "-n", ns, "link", "set", inner, "up")
            self.devices.append(inner)

    def _build_tun(self) -> None:
        fds = []
        for i, ns in enumerate(self.namespaces):
            dev = f"{self.name[:8]}t{i}"
            fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
            fds.append(fd)
            fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", dev.encode(), _IFF_TUN | _IFF_NO_PI))
            _sh("ip", "link", "set", dev, "netns", ns)  # the fd stays ours
            _sh("ip", "-n", ns, "link", "set", dev, "name", "tun0")
            _sh("ip", "-n", ns, "link", "set", "tun0", "mtu", str(_TUN_MTU), "up")
            _sh("ip", "-n", ns, "addr", "add", f"{self.addresses[i]}/24", "dev", "tun0")
            self.devices.append("tun0")
        self._router = _DelayRouter(fds, self.link.delay_ms / 1000.0)
        self._router.start()

    def _limit(self, ns: str, dev: str) -> None:
        rate = self.link.rate_mbit
        assert rate is not None
        # A burst of at least one MTU and ~1 ms at the rate; a queue of ~50 ms at the rate.
        burst = max(_TUN_MTU * 2, int(rate * 1e6 / 8 / 1000))
        limit = max(burst * 4, int(rate * 1e6 / 8 * 0.05))
        _sh(
            "tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf",
            "rate", f"{rate}mbit", "burst", str(burst), "limit", str(limit),
        )  # fmt: skip

    def close(self) -> None:
        """Stop the router and remove every namespace made (their devices go with them)."""
        if self._router is not None:
            self._router.stop()
            self._router = None
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=60)
        self._made.clear()

    # -- using it -------------------------------------------------------------------------

    def run(self, host: int, cmd: list[str]) -> list[str]:
        """``cmd`` wrapped to run in host ``host``'s namespace, with gloo (and NCCL) told to
        use its link: left alone, gloo binds the address the machine's hostname resolves to,
        loopback here, which no other host reaches."""
        dev = self.devices[host]
        return [
            "ip", "netns", "exec", self.namespaces[host],
            "env", f"GLOO_SOCKET_IFNAME={dev}", f"NCCL_SOCKET_IFNAME={dev}", *cmd,
        ]  # fmt: skip

    def torchrun(self, args: list[str], port: int = 29500) -> list[list[str]]:
        """One command per host: ``torchrun`` of one process each, node ``i`` of ``hosts``,
        meeting at host 0 (``args``: the script or ``-m module`` and its arguments)."""
        return [
            self.run(
                i,
                [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    f"--nnodes={self.hosts}",
                    f"--node-rank={i}",
                    "--nproc-per-node=1",
                    f"--master-addr={self.addresses[0]}",
                    f"--master-port={port}",
                    *args,
                ],
            )
            for i in range(self.hosts)
        ]

    def tx_bytes(self, host: int) -> int:
        """Bytes host ``host`` has sent over its link (the device's counter)."""
        return link_bytes(self.namespaces[host], self.devices[host], "tx")

    def rx_bytes(self, host: int) -> int:
        """Bytes host ``host`` has received over its link (the device's counter)."""
        return link_bytes(self.namespaces[host], self.devices[host], "rx")

    @property
    def forwarded(self) -> int:
        """Packets the delay router has forwarded (0 without delays)."""
        return 0 if self._router is None else self._router.forwarded


class _DelayRouter:
    """Moves IPv4 packets between TUN devices, each ``delay`` seconds after it was read.

    One thread, one FIFO (a constant delay keeps the order of arrival); the destination is
    the last octet of the packet's IPv4 destination (host i is ``10.77.0.<i+1>``). Anything
    else (IPv6 router solicitations, unknown destinations) is dropped.
    """

    def __init__(self, fds: list[int], delay: float) -> None:
        self.fds = fds
        self.delay = delay
        self.queue: collections.deque[tuple[float, int, bytes]] = collections.deque()
        self.forwarded = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="slow-links", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for fd in self.fds:
            os.close(fd)

    def _loop(self) -> None:
        queue, fds = self.queue, self.fds
        while not self._stop.is_set():
            wait = 0.05
            if queue:
                wait = max(0.0, min(wait, queue[0][0] - time.monotonic()))
            ready, _, _ = select.select(fds, [], [], wait)
            now = time.monotonic()
            for fd in ready:
                self._read(fd, now + self.delay)
            while queue and queue[0][0] <= time.monotonic():
                _, dst, packet = queue.popleft()
                try:
                    os.write(dst, packet)
                    self.forwarded += 1
                except OSError:  # the destination's queue is full: dropped, as a router does
                    pass

    def _read(self, fd: int, due: float) -> None:
        for _ in range(256):  # bounded, so one busy host cannot starve the others' reads
            try:
                packet = os.read(fd, 65536)
            except BlockingIOError:
                return
            if len(packet) < 20 or packet[0] >> 4 != 4:
                continue
            dst = packet[19] - 1
            if packet[16:19] != bytes(int(x) for x in SUBNET.split(".")) or not (
                0 <= dst < len(self.fds)
            ):
                continue
            self.queue.append((due, self.fds[dst], packet))
