"""One learner rank under torchrun: run the scenarios' updates, save what the tests compare.

    torchrun --standalone --nproc-per-node 2 tests/parallel/dist_worker.py OUT_DIR MODE...

MODE is ``none`` (data parallel), ``task_sharded`` or ``fsdp``, or one of those prefixed
``recurrent-`` (the model with a recurrent core); results go to ``OUT_DIR/{mode}_rank{rank}.pt``.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from parallel_scenarios import (
    LR_SCALES,
    NAMES,
    STEPS,
    build_model,
    data_parallel_shard,
    learner_config,
    state_size,
    task_shard,
)

from mtrl.algorithms.impala.parallel import make_impala_learner
from mtrl.learner.distributed import DistContext


def _local_numel(p: torch.Tensor) -> int:
    """Elements this rank stores of ``p`` (a DTensor's shard under FSDP)."""
    return p.to_local().numel() if hasattr(p, "to_local") else p.numel()


def _shard(mode: str, step: int, learner, ctx: DistContext) -> list:
    states = state_size(mode)
    if mode.endswith("task_sharded"):
        return task_shard(step, learner.local_tasks, states)
    return data_parallel_shard(step, ctx.rank, states)


def _resume_check(mode: str, ctx: DistContext) -> dict:
    """Save after two updates (rank 0's state, as the checkpoint file every rank reads on
    resume), then take the third update both in the saved learner and in a fresh one that
    loaded the state: the two must end equal."""
    saved = make_impala_learner(
        build_model(mode), learner_config(mode), NAMES, ctx, lr_scales=LR_SCALES
    )
    for i in range(2):
        saved.update(_shard(mode, i, saved, ctx))
    state = saved.state_dict()  # a collective in the sharded modes
    box = [state if ctx.rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    # Through bytes as in a checkpoint file (and a copy: the state holds the live tensors).
    buf = io.BytesIO()
    torch.save(box[0], buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    saved.update(_shard(mode, 2, saved, ctx))
    fresh = build_model(mode)
    with torch.no_grad():  # a different start: everything must come from the state
        for p in fresh.parameters():
            p.add_(0.5)
    resumed = make_impala_learner(fresh, learner_config(mode), NAMES, ctx, lr_scales=LR_SCALES)
    resumed.load_state_dict(state)
    resumed.update(_shard(mode, 2, resumed, ctx))
    return {
        "continued": saved.full_model_state(),
        "resumed": resumed.full_model_state(),
        "saved_model_keys": sorted(state["model"]),
        "saved_optimizer_params": len(state["optimizer"]["state"]),
        "versions": (saved.version, resumed.version),
    }


def main(out: Path, modes: list[str]) -> None:
    torch.set_num_threads(1)
    ctx = DistContext.from_env()
    ctx.init(torch.device("cpu"), timeout_s=60)
    try:
        for mode in modes:
            model = build_model(mode)
            learner = make_impala_learner(
                model, learner_config(mode), NAMES, ctx, lr_scales=LR_SCALES
            )
            metrics = [learner.update(_shard(mode, i, learner, ctx)) for i in range(len(STEPS))]
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
            result["resume"] = _resume_check(mode, ctx)
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
