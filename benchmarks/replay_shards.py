"""Sharded replay across nodes that are really apart: insert and draw throughput against the
number of shards, the learner's starved fraction, and the bytes that cross to the learner's
node per transition, with every node in its own network namespace.

    .venv/bin/python benchmarks/replay_shards.py [--shards 1 2 4 8] [--workers 4] \\
        [--rate-mbit 0 100] [--seconds 5] [--step-ms 5] [--draw-batches 1] \\
        [--out docs/results/replay_shards.json]

A head (the learner's node, no CPUs for Ray) and ``--workers`` worker nodes are started with
``ray start`` in network namespaces joined by veth links (:mod:`mtrl.testing.ray_nodes`), each
host's upload limited to ``--rate-mbit`` by ``tc`` when given; this script then runs again as
the driver on the head. For each shard count it builds one task's replay exactly as a learner
does (:func:`mtrl.replay.task_replay`: SAC-sized transitions of ``--obs-dim`` floats and a
4-float action, unrolls of 20 steps x 16 env copies, prioritized, capacity 1,000,000), with
shard ``i`` on worker ``i mod workers``, and measures, each for ``--seconds``:

- **actor inserts**: one writer per worker node storing unrolls in its own node's shards
  (:class:`mtrl.actors.shard_insert.ShardWriter`, as SAC's Ray actors do), transitions per
  second in all, and the bytes the head received meanwhile per transition (what crosses to
  the learner: the acknowledgements only);
- **learner inserts**: the driver sending the unrolls itself (``actor_inserts: false``), for
  the bytes an unroll costs when it does cross;
- **draws**: batches of 256 with their priority update, prefetched (``--draw-batches`` of
  them per call to the shards), back to back
  (transitions per second) and then with ``--step-ms`` of learner work between draws (a sleep,
  as a device's step leaves the CPU free), where the **starved fraction** is the share of the
  loop spent waiting for a batch; bytes received by the head per drawn transition.

On a machine with fewer cores than shards and nodes the figures measure contention, not
scaling: the JSON records the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

T, N, CAPACITY, BATCH = 20, 16, 1_000_000, 256
REPO = Path(__file__).resolve().parents[1]


def spaces_of(obs_dim: int) -> tuple[Any, Any]:
    from gymnasium import spaces

    obs = spaces.Box(-1e9, 1e9, (obs_dim,), np.float32)
    return obs, spaces.Box(-1.0, 1.0, (4,), np.float32)


def unroll(obs_dim: int, seed: int) -> Any:
    from mtrl.actors.unroll import UnrollBuffer

    rng = np.random.default_rng(seed)
    buf = UnrollBuffer.allocate(0, T, N, *spaces_of(obs_dim))
    buf.obs[:] = rng.random(buf.obs.shape, np.float32)
    buf.actions[:] = rng.random(buf.actions.shape, np.float32)
    buf.valid[:] = True
    return buf


class Counters:
    """The bytes each host's link has carried, read by namespace (the driver runs in the
    head's namespace and reads the workers' too)."""

    def __init__(self, namespaces: list[str], device: str) -> None:
        self.namespaces, self.device = namespaces, device

    def read(self) -> list[tuple[int, int]]:
        from mtrl.testing.slow_links import link_bytes

        return [
            (link_bytes(ns, self.device, "rx"), link_bytes(ns, self.device, "tx"))
            for ns in self.namespaces
        ]


def writer_class() -> Any:
    """The Ray actor that plays a node's env actors: it stores unrolls in its node's shards."""
    import ray

    @ray.remote(num_cpus=0)
    class Writer:
        def __init__(self, route: Any, obs_dim: int, seed: int) -> None:
            from mtrl.actors.shard_insert import ShardWriter

            self.node = ray.get_runtime_context().get_node_id()
            self.writer = ShardWriter(route, self.node)
            self.buf = unroll(obs_dim, seed)

        def has_shard(self) -> bool:
            return bool(self.writer.mine)

        def run(self, seconds: float) -> tuple[int, float]:
            began, steps = time.perf_counter(), 0
            while time.perf_counter() - began < seconds:
                summary = self.writer.insert(self.buf)
                if summary is None:
                    break
                steps += summary.num_steps
            return steps, time.perf_counter() - began

    return Writer


def measure(shards: int, args: argparse.Namespace, counters: Counters) -> dict[str, Any]:
    """One shard count's figures (module docstring)."""
    import ray

    from mtrl.config.replay import ReplayConfig
    from mtrl.replay import TransitionStorage, task_replay

    replay = ReplayConfig(
        sampler="prioritized",
        shards={"count": shards, "prefetch": True, "draw_batches": args.draw_batches},
    )
    obs, act = spaces_of(args.obs_dim)
    front = task_replay(TransitionStorage(0, obs, act, T, CAPACITY), replay)
    rng = np.random.default_rng(0)
    row: dict[str, Any] = {"shards": shards, "where": front.group.where()}

    # actor inserts: one writer per worker node, each into its own node's shards
    route = front.route()
    Writer = writer_class()
    writers = [
        Writer.options(resources={f"node{i}": 0.001}).remote(route, args.obs_dim, i)
        for i in range(1, args.workers + 1)
    ]
    has = ray.get([w.has_shard.remote() for w in writers])
    active = [w for w, h in zip(writers, has, strict=True) if h]
    before = counters.read()
    done = ray.get([w.run.remote(args.seconds) for w in active])
    after = counters.read()
    inserted = sum(s for s, _ in done)
    row["writer_nodes"] = len(active)
    row["actor_insert_transitions_s"] = inserted / max(e for _, e in done)
    row["actor_insert_head_rx_per_transition"] = (after[0][0] - before[0][0]) / inserted
    for w in writers:
        ray.kill(w)
    front.refresh()

    # learner inserts: the unrolls cross to the shards
    buf = unroll(args.obs_dim, 0)
    before, began, sent = counters.read(), time.perf_counter(), 0
    while time.perf_counter() - began < args.seconds:
        front.add_unroll(buf)
        sent += 1
        while len(front._adds) > 2 * shards:  # at most two in flight per shard
            front.collect(block=True)
    while front._adds:
        front.collect(block=True)
    elapsed, after = time.perf_counter() - began, counters.read()
    row["learner_insert_transitions_s"] = sent * T * N / elapsed
    row["learner_insert_head_tx_per_transition"] = (after[0][1] - before[0][1]) / (sent * T * N)

    # draws, back to back and with a learner step between them
    for step_ms in (0.0, args.step_ms):
        before, began, draws, waited = counters.read(), time.perf_counter(), 0, 0.0
        while time.perf_counter() - began < args.seconds:
            t0 = time.perf_counter()
            _, idx, _ = front.sample(BATCH, rng)
            waited += time.perf_counter() - t0
            front.update_priorities(idx, rng.random(BATCH))
            draws += 1
            if step_ms:
                time.sleep(step_ms / 1000)
        elapsed, after = time.perf_counter() - began, counters.read()
        key = "draw" if not step_ms else f"draw_step{step_ms:g}ms"
        row[f"{key}_transitions_s"] = draws * BATCH / elapsed
        row[f"{key}_starved_fraction"] = waited / elapsed
        row[f"{key}_head_rx_per_transition"] = (after[0][0] - before[0][0]) / (draws * BATCH)
    batch, _, _ = front.sample(BATCH, rng)
    row["row_bytes"] = sum(v.nbytes for v in vars(batch).values()) / BATCH  # a row's arrays
    row["items"] = front.sampler.count
    for handle in front.group.handles.values():  # the next shard count starts afresh
        ray.kill(handle, no_restart=True)
    return row


def drive(args: argparse.Namespace) -> None:
    """The driver, on the head's host: one JSON line per shard count."""
    import ray

    ray.init(address=os.environ["RAY_ADDRESS"], logging_level="ERROR")
    counters = Counters(args.namespaces.split(","), args.device)
    for n in args.shards:
        print("ROW " + json.dumps(measure(n, args, counters)), flush=True)
    ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--cpus", type=float, default=2.0, help="CPUs each worker offers Ray")
    parser.add_argument(
        "--rate-mbit",
        type=float,
        nargs="+",
        default=[0.0, 100.0],
        help="each host's upload rate, one run each (0: unlimited)",
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--step-ms", type=float, default=5.0)
    parser.add_argument("--obs-dim", type=int, default=39)
    parser.add_argument("--draw-batches", type=int, default=1, help="replay.shards.draw_batches")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--namespaces", help=argparse.SUPPRESS)
    parser.add_argument("--device", help=argparse.SUPPRESS)
    args = parser.parse_args()  # fmt: skip
    if args.driver:
        drive(args)
        return
    from mtrl.testing.ray_nodes import RayNodes
    from mtrl.testing.slow_links import Link, SlowNetwork

    runs = []
    for rate in args.rate_mbit:
        link = Link(rate_mbit=rate or None)
        with (
            SlowNetwork(hosts=args.workers + 1, link=link) as net,
            RayNodes(net, [args.cpus] * args.workers) as nodes,
        ):
            cmd = [
                sys.executable, __file__, "--driver", "--shards", *map(str, args.shards),
                "--workers", str(args.workers), "--seconds", str(args.seconds),
                "--step-ms", str(args.step_ms), "--obs-dim", str(args.obs_dim),
                "--draw-batches", str(args.draw_batches),
                "--namespaces", ",".join(net.namespaces), "--device", net.devices[0],
            ]  # fmt: skip
            env = dict(nodes.env, PYTHONPATH=str(REPO))
            out = subprocess.run(nodes.driver(cmd), env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"driver failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
        rows = [json.loads(ln[4:]) for ln in out.stdout.splitlines() if ln.startswith("ROW ")]
        for row in rows:
            row["link"] = str(link)
            print(json.dumps(row), flush=True)
        runs.append({"link": str(link), "rows": rows})
    if args.out is not None:
        record = {
            "benchmark": "replay_shards",
            "args": {k: v for k, v in vars(args).items() if k not in ("driver", "out")},
            "cpu_count": os.cpu_count(),
            "load_avg_1min_at_end": os.getloadavg()[0],
            "git_commit": subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
            ).stdout.strip(),
            "runs": runs,
        }
        args.out.write_text(json.dumps(record, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
