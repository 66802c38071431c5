"""One data-parallel SAC rank under torchrun: run the scenario, save what the test compares.

    torchrun --standalone --nproc-per-node 2 tests/parallel/sac_dist_worker.py OUT_DIR GRADIENTS...

For each ``learner.multitask.gradients`` named (sum, pcgrad, cagrad; ``famo``: summed, with
FAMO's weighted critic losses; ``-per-task``: on SAC's per-task step instead of the stacked
one), writes ``OUT_DIR/sac_{name}_rank{rank}.pt``: the scenario's results and, after two more
updates, the results of a learner resumed from rank 0's state beside the one that saved it.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from sac_scenarios import (
    BATCH,
    NAMES,
    FixedRowsDataParallelSac,
    build_model,
    learner_config,
    run,
    step_path,
)

from mtrl.learner.distributed import DistContext


def _replica(ctx: DistContext, name: str) -> FixedRowsDataParallelSac:
    gradients, _, path = name.partition("-")
    cfg = learner_config(BATCH, gradients=gradients)
    with step_path(path != "per-task"):
        learner = FixedRowsDataParallelSac(build_model(), cfg, NAMES, ctx)
    assert (learner.stacked is not None) is (path != "per-task")
    learner.ranks = [ctx.rank]
    return learner


def main(out: Path, combinations: list[str]) -> None:
    ctx = DistContext.from_env()
    ctx.init(torch.device("cpu"))
    for gradients in combinations:
        scenario(ctx, out, gradients)
    ctx.destroy()


def scenario(ctx: DistContext, out: Path, gradients: str) -> None:
    torch.manual_seed(1234 + ctx.rank)  # replicas must start equal whatever their seed
    learner = _replica(ctx, gradients)
    result = run(learner)
    # Resume: rank 0's state through bytes as in a checkpoint file; both learners then take
    # the scenario's updates again and must stay equal.
    box = [learner.state_dict() if ctx.rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    buf = io.BytesIO()
    torch.save(box[0], buf)
    buf.seek(0)
    resumed = _replica(ctx, gradients)
    resumed.load_state_dict(torch.load(buf, weights_only=True))
    resumed.drawn = learner.drawn
    result["continued"] = run(learner)
    result["resumed"] = run(resumed)
    torch.save(result, out / f"sac_{gradients}_rank{ctx.rank}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
