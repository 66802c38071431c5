"""A Ray cluster whose nodes are really apart: each node in its own network namespace of a
:class:`~mtrl.testing.slow_links.SlowNetwork`, with its own address, started by the same
commands as on a real cluster (``ray start --head`` on host 0, ``ray start --address`` on the
others), so every byte between nodes crosses a veth link that ``tc`` can slow down::

    with SlowNetwork(hosts=5, link=Link(rate_mbit=100)) as net, RayNodes(net, [2] * 4) as nodes:
        subprocess.run(nodes.driver([sys.executable, "-m", "mtrl.cli", "train", cfg]))
        net.rx_bytes(0)   # what reached the head's node over its link

``ray.cluster_utils.Cluster`` runs every node on loopback, where nothing can be counted or
rate-limited per node; this harness is what the sharded replay's multi-node test and benchmark
use for bytes between nodes. Each node gets its own temp dir (its sockets, logs and object
store spill), and the cluster its own random token (``RAY_AUTH_MODE=token``), as a hand-started
cluster should have (docs/DISTRIBUTED.md). :meth:`RayNodes.close` stops every node and then
kills whatever is left in the namespaces (processes outlive a deleted namespace).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mtrl.testing.slow_links import SlowNetwork

__all__ = ["RayNodes"]

PORT = 6379
START_TIMEOUT_S = 180.0


class RayNodes:
    """A Ray head (``head_cpus`` CPUs, default none: the learner's node) in ``net``'s host 0
    and one worker node per entry of ``worker_cpus`` in hosts 1, 2, ..., each worker offering
    its CPUs and the custom resource ``node<i>: 1`` (``i`` from 1), so a test can pin to it."""

    def __init__(
        self,
        net: SlowNetwork,
        worker_cpus: list[float],
        head_cpus: float = 0,
        object_store_mb: int = 200,
    ) -> None:
        if len(worker_cpus) > net.hosts - 1:
            raise ValueError(f"{len(worker_cpus)} worker nodes need {len(worker_cpus) + 1} hosts")
        self.net = net
        self.worker_cpus = list(worker_cpus)
        self.head_cpus = head_cpus
        self.object_store_mb = object_store_mb
        self.address = f"{net.addresses[0]}:{PORT}"
        self.env = dict(
            os.environ,
            RAY_AUTH_MODE="token",
            RAY_AUTH_TOKEN=secrets.token_hex(32),
            RAY_USAGE_STATS_ENABLED="0",
        )
        self.env.pop("RAY_ADDRESS", None)
        self._tmp = Path(tempfile.mkdtemp(prefix="mtrl-raynodes-"))
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    # -- starting and stopping ------------------------------------------------------------

    def __enter__(self) -> RayNodes:
        try:
            self._up(0, ["--head", f"--port={PORT}", "--include-dashboard=false"], None, None)
            for i, cpus in enumerate(self.worker_cpus, start=1):
                self._up(i, [f"--address={self.address}"], cpus, {f"node{i}": 1})
            self.wait_for(1 + len(self.worker_cpus))
        except BaseException:
            self.close()
            raise
        return self

    def _up(self, host: int, args: list[str], cpus: float | None, res: dict | None) -> None:
        """Start node ``host`` and wait until it says it runs, one node at a time (starting
        them together on a loaded machine made a raylet miss the GCS's deadline); a node that
        exits while starting is started once more."""
        for attempt in range(2):
            self._start(host, args, cpus, res)
            try:
                self._wait_started(host)
                return
            except RuntimeError:
                self._kill_namespace(self.net.namespaces[host])
                self._procs.pop(host).wait(timeout=30)
                if attempt:
                    raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ray(self) -> str:
        found = Path(sys.executable).with_name("ray")
        return str(found) if found.exists() else (shutil.which("ray") or "ray")

    def _start(
        self, host: int, args: list[str], cpus: float | None = None, res: dict | None = None
    ) -> None:
        """``ray start ... --block`` of node ``host`` in its namespace (its log in the temp
        dir); ``--block`` keeps the node's processes under one process that stops them."""
        cpus = self.head_cpus if cpus is None else cpus
        cmd = [
            self._ray(), "start", *args, "--block",
            f"--node-ip-address={self.net.addresses[host]}",
            f"--num-cpus={cpus:g}",
            f"--object-store-memory={self.object_store_mb * 2**20}",
            f"--temp-dir={self._tmp / f'h{host}'}",
        ]  # fmt: skip
        if res:
            cmd.append("--resources=" + _json(res))
        log = (self._tmp / f"node{host}.log").open("wb")  # a new start writes it anew
        self._procs[host] = subprocess.Popen(
            self.net.run(host, cmd), env=self.env, stdout=log, stderr=subprocess.STDOUT
        )

    def _wait_started(self, host: int, timeout: float = START_TIMEOUT_S) -> None:
        """Wait for ``ray start``'s word that node ``host`` runs (its log, no Ray call)."""
        deadline = time.monotonic() + timeout
        while "Ray runtime started" not in self.log(host):
            if self._procs[host].poll() is not None:
                raise RuntimeError(f"Ray node {host} exited: {self.log(host)[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Ray node {host} not started after {timeout:g} s")
            time.sleep(0.2)

    def wait_for(self, alive: int, timeout: float = START_TIMEOUT_S) -> None:
        """Wait until the cluster has ``alive`` live nodes; a node that exits first, or the
        timeout, raises with the end of its log."""
        probe = (
            "import ray,sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
            "print(sum(n['Alive'] for n in ray.nodes()))"
        )
        deadline = time.monotonic() + timeout
        while True:
            for host, proc in self._procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"Ray node {host} exited: {self.log(host)[-2000:]}")
            out = subprocess.run(
                self.driver([sys.executable, "-c", probe, self.address]),
                env=self.env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            lines = out.stdout.split()
            if out.returncode == 0 and lines and int(lines[-1]) >= alive:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{alive} Ray nodes not alive after {timeout:g} s: {out.stderr}")
            time.sleep(1.0)

    def log(self, host: int) -> str:
        """The ``ray start`` output of node ``host``."""
        path = self._tmp / f"node{host}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill_node(self, host: int) -> None:
        """Node ``host`` lost at once, as when its machine dies: every process in its
        namespace killed (SIGKILL), nothing drained."""
        self._kill_namespace(self.net.namespaces[host])
        proc = self._procs.pop(host, None)
        if proc is not None:
            proc.wait(timeout=30)

    def close(self) -> None:
        """Stop every node (SIGTERM: Ray drains and stops its processes), then kill what is
        left in the namespaces and remove the temp dirs."""
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self._procs.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        self._procs.clear()
        for ns in self.net.namespaces:
            self._kill_namespace(ns)
        shutil.rmtree(self._tmp, ignore_errors=True)

    @staticmethod
    def _kill_namespace(ns: str) -> None:
        for _ in range(20):
            out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            pids = [int(p) for p in out.stdout.split()]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)

    # -- using it -------------------------------------------------------------------------

    def driver(self, cmd: list[str]) -> list[str]:
        """``cmd`` wrapped to run on the head's host with ``RAY_ADDRESS`` set: a driver such as
        ``mtrl train`` (run it with :attr:`env`, which holds the cluster's token)."""
        return self.net.run(0, ["env", f"RAY_ADDRESS={self.address}", *cmd])


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def main(argv: list[str] | None = None) -> int:
    """``python -m mtrl.testing.ray_nodes [--workers 4] [--cpus 1] [--rate-mbit R] -- CMD``:
    ``CMD`` run as the driver of a cluster of a head and ``--workers`` worker nodes in their own
    network namespaces; prints the bytes each host sent and received over its link, as JSON,
    and exits with ``CMD``'s status."""
    import argparse

    from mtrl.testing.slow_links import Link

    parser = argparse.ArgumentParser(prog="python -m mtrl.testing.ray_nodes")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--cpus", type=float, default=1.0, help="CPUs each worker offers")
    parser.add_argument("--rate-mbit", type=float, default=None, help="each host's upload rate")
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("a command to run as the driver is needed after --")
    link = Link(rate_mbit=args.rate_mbit)
    with (
        SlowNetwork(hosts=args.workers + 1, link=link) as net,
        RayNodes(net, [args.cpus] * args.workers) as nodes,
    ):
        code = subprocess.run(nodes.driver(cmd), env=nodes.env).returncode
        links = [
            {"host": i, "address": net.addresses[i], "tx": net.tx_bytes(i), "rx": net.rx_bytes(i)}
            for i in range(net.hosts)
        ]
    print(json.dumps({"links": links, "exit": code}), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
