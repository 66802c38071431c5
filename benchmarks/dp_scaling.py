"""Learner-only weak scaling of data parallel: 1 → 2 gloo ranks on CPU, synthetic batches.

    .venv/bin/python benchmarks/dp_scaling.py [--updates 40] [--out docs/results/dp_scaling.json]

Each rank takes the same per-rank batch (3 tasks: vector/discrete, vector/continuous, 10x10
uint8 image; unroll 20) with the default model sizes, one torch thread per rank, every
update all-reducing the sample count, PopArt sums, gradients and metrics. Ranks are launched
by torchrun, as in training. Prints samples/s per rank and in total for each world size, and
the ratio; writes them as JSON. Indicative only on a shared, noisy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from gymnasium import spaces

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

from mtrl.algorithms.impala.parallel import make_impala_learner
from mtrl.config import LearnerConfig
from mtrl.learner.distributed import DistContext, all_reduce_gradients
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.learner.synthetic import random_task_batch

SPACES = [
    TaskSpaces(spaces.Box(-np.inf, np.inf, (8,), np.float32), spaces.Discrete(4)),
    TaskSpaces(spaces.Box(-1, 1, (17,), np.float32), spaces.Box(-1, 1, (6,), np.float32)),
    TaskSpaces(spaces.Box(0, 1, (4, 10, 10), np.uint8), spaces.Discrete(6)),
]
NAMES = ["vector", "continuous", "image"]
ENVS_PER_TASK = [8, 4, 4]  # columns of each task in one rank's batch
UNROLL = 20
WARMUP = 3


def _allreduce_ms(learner, repeats: int = 20) -> float:
    """Time of one flat gradient all-reduce alone (the update's largest collective)."""
    params = [p for p in learner.model.parameters() if p.grad is not None]
    dist.barrier()
    start = time.perf_counter()
    for _ in range(repeats):
        all_reduce_gradients(params)
    return 1e3 * (time.perf_counter() - start) / repeats


def worker(updates: int, out: Path) -> None:
    """One rank: time ``updates`` learner updates on its own synthetic batch."""
    torch.set_num_threads(1)
    ctx = DistContext.from_env()
    ctx.init(torch.device("cpu"))
    cfg = LearnerConfig()
    torch.manual_seed(0)
    learner = make_impala_learner(MultiTaskModel(SPACES, cfg.model), cfg, NAMES, ctx)
    batches = [
        random_task_batch(k, SPACES[k], UNROLL, n, seed=1000 * ctx.rank + k)
        for k, n in enumerate(ENVS_PER_TASK)
    ]
    local = sum(b.num_samples for b in batches)
    for _ in range(WARMUP):
        learner.update(batches)
    start = time.perf_counter()
    for _ in range(updates):
        metrics = learner.update(batches)
    seconds = time.perf_counter() - start
    result = {"rank": ctx.rank, "seconds": seconds, "local_samples": local * updates}
    result["global_samples"] = metrics["charts/learner_samples"] * updates
    result["num_parameters"] = sum(p.numel() for p in learner.model.parameters())
    result["grad_allreduce_ms"] = _allreduce_ms(learner) if ctx.distributed else 0.0
    (out / f"rank{ctx.rank}.json").write_text(json.dumps(result))
    ctx.destroy()


def run(world: int, updates: int) -> dict[str, float]:
    """Launch ``world`` ranks with torchrun and summarise their timings."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={world}", __file__, "--worker", tmp, "--updates", str(updates),
        ]  # fmt: skip
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        subprocess.run(cmd, check=True, env=env, capture_output=True, text=True)
        ranks = [json.loads((Path(tmp) / f"rank{r}.json").read_text()) for r in range(world)]
    seconds = max(r["seconds"] for r in ranks)
    total = sum(r["local_samples"] for r in ranks)
    return {
        "world_size": world,
        "updates": updates,
        "samples_per_update_per_rank": ranks[0]["local_samples"] / updates,
        "update_ms": 1e3 * seconds / updates,
        "samples_per_s_per_rank": total / world / seconds,
        "samples_per_s_total": total / seconds,
        "grad_allreduce_ms": max(r["grad_allreduce_ms"] for r in ranks),
        "num_parameters": ranks[0]["num_parameters"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=40)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.updates, args.worker)
        return
    one, two = run(1, args.updates), run(2, args.updates)
    ratio = two["samples_per_s_total"] / one["samples_per_s_total"]
    for r in (one, two):
        print(
            f"{r['world_size']} rank(s): {r['update_ms']:.1f} ms/update, "
            f"{r['samples_per_s_per_rank']:,.0f} samples/s per rank, "
            f"{r['samples_per_s_total']:,.0f} total; gradient all-reduce "
            f"{r['grad_allreduce_ms']:.2f} ms ({r['num_parameters']:,} parameters)"
        )
    print(f"total throughput 2 ranks / 1 rank: {ratio:.2f}x (ideal 2.0x on 2 free cores)")
    payload = {
        "benchmark": "dp_scaling",
        "machine": machine(),
        "per_world_size": [one, two],
        "total_ratio_2_over_1": ratio,
        "note": "weak scaling, gloo on CPU, 1 thread per rank; shared noisy machine: indicative",
    }
    print(f"wrote {write_result('dp_scaling', payload)}")


if __name__ == "__main__":
    main()
