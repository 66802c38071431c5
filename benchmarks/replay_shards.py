"""Sharded replay throughput: unroll inserts and prioritized draws per second against the
number of shards (``replay.shards.count``), on one machine's Ray.

    .venv/bin/python benchmarks/replay_shards.py [--shards 1 2 4] [--seconds 5] [--nodes 0]
    # prints one JSON line per shard count; nothing is written

Each shard count gets a fresh task replay of transitions (4-float observations, unrolls of 20
steps x 16 env copies, prioritized sampling, capacity 200,000) behind
:func:`mtrl.replay.task_replay`, exactly as a learner builds it. **Inserts**: unrolls sent for
``--seconds`` and then all acknowledged, in transitions per second. **Draws**: batches of 256
with their priority update, prefetched as the learner draws, in transitions per second. With
``--nodes N`` the shards sit on ``N`` simulated worker nodes of a ``ray.cluster_utils.Cluster``
(one CPU each) instead of an embedded Ray. Run it inside a network namespace to keep Ray's
traffic private (``unshare -rn sh -c 'ip link set lo up && exec "$@"' sh .venv/bin/python
benchmarks/replay_shards.py``). On a machine with fewer cores than shards, the figures measure
contention, not scaling.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from gymnasium import spaces

from mtrl.actors.unroll import UnrollBuffer
from mtrl.config.replay import ReplayConfig
from mtrl.replay import TransitionStorage, task_replay

T, N, CAPACITY, BATCH = 20, 16, 200_000, 256
OBS, ACT = spaces.Box(-1e9, 1e9, (4,), np.float32), spaces.Discrete(4)


def unroll(rng: np.random.Generator) -> UnrollBuffer:
    buf = UnrollBuffer.allocate(0, T, N, OBS, ACT)
    buf.obs[:] = rng.random(buf.obs.shape, np.float32)
    buf.valid[:] = True
    return buf


def measure(shards: int, seconds: float, num_cpus: float) -> dict[str, float]:
    """Insert and draw throughput of one sharded replay of ``shards`` shards."""
    replay = ReplayConfig(
        sampler="prioritized", shards={"count": shards, "num_cpus": num_cpus, "prefetch": True}
    )
    front = task_replay(TransitionStorage(0, OBS, ACT, T, CAPACITY), replay)
    rng = np.random.default_rng(0)
    buf = unroll(rng)
    began, sent = time.perf_counter(), 0
    while time.perf_counter() - began < seconds:
        front.add_unroll(buf)
        sent += 1
        front.collect()
    while front._adds:
        front.collect(block=True)
    inserts = sent * T * N / (time.perf_counter() - began)
    began, draws = time.perf_counter(), 0
    while time.perf_counter() - began < seconds:
        _, idx, _ = front.sample(BATCH, rng)
        front.update_priorities(idx, rng.random(BATCH))
        draws += 1
    samples = draws * BATCH / (time.perf_counter() - began)
    return {"shards": shards, "insert_transitions_s": inserts, "sample_transitions_s": samples}


def main() -> None:
    import ray

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--nodes", type=int, default=0)
    args = parser.parse_args()
    cluster = None
    if args.nodes:
        from ray.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        for _ in range(args.nodes):
            cluster.add_node(num_cpus=max(args.shards))
        ray.init(address=cluster.address)
    else:
        ray.init(address="local", include_dashboard=False)
    try:
        for n in args.shards:
            print(json.dumps(measure(n, args.seconds, 1.0 if args.nodes else 0.0)), flush=True)
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()


if __name__ == "__main__":
    main()
