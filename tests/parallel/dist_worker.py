"""One learner rank under torchrun: run the scenarios' updates, save what the tests compare.

    torchrun --standalone --nproc-per-node 2 tests/parallel/dist_worker.py OUT_DIR MODE...

MODE is ``none`` (data parallel), ``task_sharded`` or ``fsdp``; results go to
``OUT_DIR/{mode}_rank{rank}.pt``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from parallel_scenarios import (
    NAMES,
    STEPS,
    build_model,
    data_parallel_shard,
    learner_config,
    task_shard,
)

from mtrl.learner.distributed import DistContext
from mtrl.learner.parallel import make_learner


def _local_numel(p: torch.Tensor) -> int:
    """Elements this rank stores of ``p`` (a DTensor's shard under FSDP)."""
    return p.to_local().numel() if hasattr(p, "to_local") else p.numel()


def main(out: Path, modes: list[str]) -> None:
    torch.set_num_threads(1)
    ctx = DistContext.from_env()
    ctx.init(torch.device("cpu"), timeout_s=60)
    try:
        for mode in modes:
            model = build_model()
            learner = make_learner(model, learner_config(mode), NAMES, ctx)
            metrics = []
            for i in range(len(STEPS)):
                if mode == "task_sharded":
                    batches = task_shard(i, learner.local_tasks)
                else:
                    batches = data_parallel_shard(i, ctx.rank)
                metrics.append(learner.update(batches))
            result = {
                "state": learner.full_model_state(),
                "local_keys": sorted(learner.model.state_dict()),
                "local_tasks": learner.local_tasks,
                "mu": learner.mu.clone(),
                "nu": learner.nu.clone(),
                "metrics": metrics,
                "world_size": ctx.world_size,
                "all_sum": ctx.all_sum([1, ctx.rank]),
                "torso_local_numel": sum(_local_numel(p) for p in model.torso.parameters()),
                "torso_full_numel": sum(p.numel() for p in model.torso.parameters()),
            }
            torch.save(result, out / f"{mode}_rank{ctx.rank}.pt")
    except BaseException:
        ctx.destroy(wait_for_peers=False)
        raise
    # Every result is on disk. Leave without tearing gloo down: on a loaded machine its
    # destructor threads occasionally abort the process ("terminate called without an active
    # exception") after the work is done, which would fail the launch for nothing.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
