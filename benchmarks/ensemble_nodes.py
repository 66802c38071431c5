"""A thousand coupled members over several Ray nodes: start-up, step cost, memory, kill detection.

Melissa-style ensembles couple thousands of small simulations at once. Here ``--nodes`` Ray
nodes (``ray.cluster_utils.Cluster``: a head without CPUs and ``--nodes`` worker nodes, in a
private network namespace when one can be made, so every byte stays on loopback) each hold
``--hosts-per-node`` Ray actors, and each actor builds one external batch env of ``--members``
members of a cheap C code (the C client's drift simulation, ``tests/external/drift_sim.c``: two
floats of state, physics ~0, so what is measured is the coupling), **one process per member**
(``copies_per_process=1``) with single-member restart on: the same env an mtrl actor steps.
Measured:

- **start-up**: seconds from the actors' build call to every member's first observation (every
  code launched and through its handshake), per actor and for the whole ensemble; the actors
  start one after the other (``--start in-turn``; on a cluster each node launches its own
  members on its own cores) or all at once (``--start together``);
- **step**: every actor steps its batch ``--steps`` times at once; the ensemble's env steps/s,
  each actor's batch-step p50/p99, and the cost per member-step (batch step / members) beside
  **a bare round trip**: the same member's request and reply as plain ZeroMQ messages between
  two processes on that node (a C-free echo, pyzmq on both sides), with nothing of mtrl around
  it, and beside a batch env of one member;
- **memory per member**: the proportional set size (PSS, shared pages split among their users)
  of every process an actor's env started (launcher and code), summed over the actors and
  divided by the members;
- **kill detection**: ``--kills`` times, a random member's code on a random node is killed with
  SIGKILL while the ensemble steps; the seconds until its actor sees the fault and until the
  member is up again, and the steps the other members of its batch made meanwhile.

Usage: ``python benchmarks/ensemble_nodes.py [--nodes 4] [--hosts-per-node 2] [--members 128]
[--steps 100] [--kills 4] [--results-dir DIR]``; writes ``ensemble_nodes.json`` in
``docs/results`` or DIR. Measures speed and memory: run it alone.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result
from ensemble_scale import pss_bytes

from mtrl.coupling.launcher import descendants
from mtrl.testing.netns import in_private_network

INSIDE = "MTRL_BENCH_NETNS"
ROOT = Path(__file__).resolve().parent.parent
DRIFT_C = ROOT / "tests" / "external" / "drift_sim.c"
ECHO = """
import sys, zmq
sock = zmq.Context().socket(zmq.REP)
sock.bind(sys.argv[1])
while True:
    msg = sock.recv_multipart()
    if msg[0] == b"stop":
        sock.send(b"")
        break
    sock.send_multipart(msg)
"""


def drift_binary() -> Path:
    """The C drift simulation, built (and cached) against the C client."""
    from mtrl.coupling import cbuild

    return cbuild.build([DRIFT_C], "drift_sim", cflags=("-O2",))


class Host:
    """One Ray actor's batch env of coupled members (a Ray actor class once :func:`remote`)."""

    def __init__(self, binary: str, members: int, seed: int) -> None:
        self.binary, self.n, self.seed = binary, members, seed
        self.env: Any = None
        self.actions = np.zeros((members, 1), np.float32)
        self.rng = random.Random(seed)

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def build(self) -> float:
        """Launch every member and reset them; the seconds it took."""
        from mtrl.plugins.external import ExternalSim

        sim = ExternalSim(
            command=f"{self.binary} {{address}}", copies_per_process=1, step_timeout_s=60.0
        )
        t0 = time.perf_counter()
        self.env = sim(num_envs=self.n, seed=self.seed, member_restart=True)
        self.env.reset()
        return time.perf_counter() - t0

    def step(self, steps: int) -> list[float]:
        """``steps`` batch steps; each one's wall seconds."""
        walls = []
        for _ in range(steps):
            t0 = time.perf_counter()
            self.env.step(self.actions)
            walls.append(time.perf_counter() - t0)
        return walls

    def memory(self) -> tuple[int, int]:
        """(processes, PSS bytes) of everything this actor's env started."""
        procs = descendants(os.getpid())
        return len(procs), sum(pss_bytes(p) for p in procs)

    def codes(self) -> list[int]:
        """The members' code processes (the drift binary under each launcher)."""
        out = []
        for pid in descendants(os.getpid()):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if cmd == self.binary.encode():
                out.append(pid)
        return out

    def kill_one(self, timeout_s: float = 120.0) -> dict[str, Any]:
        """Kill a random member's code while stepping: seconds until the fault is seen and
        until every member is up again, and the steps the others made meanwhile."""
        victim = self.rng.choice(self.codes())
        os.kill(victim, signal.SIGKILL)
        t_kill = time.perf_counter()
        seen, steps, others = None, 0, 0
        while time.perf_counter() - t_kill < timeout_s:
            out = self.env.step(self.actions)
            steps += 1
            valid = out.valid if out.valid is not None else np.ones(self.n, bool)
            others += int(valid.sum())
            if seen is None and self.env.pop_member_faults():
                seen = time.perf_counter() - t_kill
            if seen is not None and all(m.state == "up" for m in self.env.members):
                break
        return {
            "seen_s": seen,
            "up_s": time.perf_counter() - t_kill,
            "batch_steps_meanwhile": steps,
            "other_member_steps": others,
        }

    def bare_round_trip(self, rounds: int) -> dict[str, float]:
        """Seconds per plain ZeroMQ request and reply of one member's step (its action out,
        observation, reward and flags back, as bytes) with an echo process on this node; and
        per step of a batch env of one member."""
        import zmq

        address = f"ipc:///tmp/mtrl-echo-{os.getpid()}.sock"
        echo = subprocess.Popen([sys.executable, "-c", ECHO, address])
        sock = zmq.Context.instance().socket(zmq.REQ)
        sock.connect(address)
        frames = [b"step", np.zeros(1, np.float32).tobytes(), np.zeros(2, np.float32).tobytes()]
        walls = []
        for i in range(rounds + 50):
            t0 = time.perf_counter()
            sock.send_multipart(frames)
            sock.recv_multipart()
            if i >= 50:
                walls.append(time.perf_counter() - t0)
        sock.send(b"stop")
        sock.recv()
        sock.close()
        echo.wait(timeout=10)
        one = Host(self.binary, 1, self.seed + 10_000)
        one.build()
        try:
            one.step(50)
            single = one.step(rounds)
        finally:
            one.close()
        return {"bare_s": float(np.median(walls)), "one_member_env_s": float(np.median(single))}

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


def run(args: argparse.Namespace) -> dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    binary = str(drift_binary())
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    nodes = [cluster.add_node(num_cpus=args.hosts_per_node) for _ in range(args.nodes)]
    ray.init(address=cluster.address)
    cluster.wait_for_nodes()
    remote = ray.remote(num_cpus=1)(Host)
    node_ids = [n.node_id for n in nodes]
    hosts = [
        remote.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_ids[k], soft=False)
        ).remote(binary, args.members, seed=1000 * (k * args.hosts_per_node + h))
        for k in range(args.nodes)
        for h in range(args.hosts_per_node)
    ]
    total = args.members * len(hosts)
    try:
        placed = ray.get([h.node.remote() for h in hosts])
        t0 = time.perf_counter()
        if args.start == "together":
            startups = ray.get([h.build.remote() for h in hosts])
        else:  # one actor after the other: on a cluster each would start on its own cores
            startups = [ray.get(h.build.remote()) for h in hosts]
        startup_all = time.perf_counter() - t0
        print(
            f"{total} members on {len(set(placed))} nodes ({len(hosts)} actors of "
            f"{args.members}): up in {startup_all:.1f} s (per actor {min(startups):.1f}–"
            f"{max(startups):.1f} s)",
            flush=True,
        )
        ray.get([h.step.remote(5) for h in hosts])
        t0 = time.perf_counter()
        walls = ray.get([h.step.remote(args.steps) for h in hosts])
        wall = time.perf_counter() - t0
        sps = total * args.steps / wall
        flat = np.concatenate(walls)
        p50, p99 = np.percentile(flat, [50, 99])
        mem = ray.get([h.memory.remote() for h in hosts])
        procs, pss = sum(m[0] for m in mem), sum(m[1] for m in mem)
        trip = ray.get(hosts[0].bare_round_trip.remote(500))
        per_member = p50 / args.members
        print(
            f"stepping: {sps:,.0f} env steps/s | batch step p50/p99 {p50 * 1e3:.1f}/"
            f"{p99 * 1e3:.1f} ms = {per_member * 1e6:.0f} µs per member-step | bare round trip "
            f"{trip['bare_s'] * 1e6:.0f} µs, a one-member env's step "
            f"{trip['one_member_env_s'] * 1e6:.0f} µs | {pss / total / 2**20:.1f} MB and "
            f"{procs / total:.1f} processes per member",
            flush=True,
        )
        rng = random.Random(0)
        kills = []
        for k in range(args.kills):
            h = rng.randrange(len(hosts))
            others = [x.step.remote(20) for i, x in enumerate(hosts) if i != h]
            res = ray.get(hosts[h].kill_one.remote())
            ray.get(others)
            res.update(actor=h, node=placed[h])
            kills.append(res)
            print(
                f"kill {k}: actor {h}: seen in {res['seen_s'] or float('nan'):.2f} s, up again "
                f"in {res['up_s']:.2f} s, {res['batch_steps_meanwhile']} batch steps meanwhile",
                flush=True,
            )
    finally:
        ray.get([h.close.remote() for h in hosts])
        ray.shutdown()
        cluster.shutdown()
    return {
        "nodes": args.nodes,
        "actors": len(hosts),
        "members_per_actor": args.members,
        "members": total,
        "nodes_used": len(set(placed)),
        "startup_s": startup_all,
        "startup_per_actor_s": startups,
        "env_steps_per_s": sps,
        "batch_step_s": {"p50": float(p50), "p99": float(p99)},
        "per_member_step_s": float(per_member),
        "bare_round_trip_s": trip["bare_s"],
        "one_member_env_step_s": trip["one_member_env_s"],
        "processes_per_member": procs / total,
        "memory_per_member_mb": pss / total / 2**20,
        "kills": kills,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--hosts-per-node", type=int, default=2)
    p.add_argument("--members", type=int, default=128)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--kills", type=int, default=4)
    p.add_argument(
        "--start",
        choices=["together", "in-turn"],
        default="in-turn",
        help="build the actors' envs at once, or one actor after the other (default: a small "
        "machine cannot launch a thousand codes at once within their heartbeats)",
    )
    p.add_argument("--results-dir", type=Path)
    args = p.parse_args()
    if not os.environ.get(INSIDE):
        env = dict(os.environ, **{INSIDE: "1", "RAY_USAGE_STATS_ENABLED": "0"})
        sys.exit(
            subprocess.run(in_private_network([sys.executable, *sys.argv]), env=env).returncode
        )
    result = {"machine": machine(), "args": {k: str(v) for k, v in vars(args).items()}}
    result.update(run(args))
    print(f"wrote {write_result('ensemble_nodes', result, args.results_dir)}")


if __name__ == "__main__":
    main()
