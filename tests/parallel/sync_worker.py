"""One learner rank under torchrun for the loosened-synchronisation tests.

    torchrun --standalone --nproc-per-node 2 tests/parallel/sync_worker.py OUT_DIR SCENARIO...

Each scenario writes ``OUT_DIR/{scenario}_rank{rank}.pt`` (test_loose_sync.py reads them).
Every rank learns from its own batches: the same updates' columns split over the ranks.
"""

from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from parallel_scenarios import CFG, NAMES, SPACES, UNROLL, WORLD

from mtrl.algorithms.impala.parallel import make_impala_learner
from mtrl.config import LearnerConfig
from mtrl.learner.batch import TaskBatch
from mtrl.learner.distributed import DistContext
from mtrl.learner.model import MultiTaskModel
from mtrl.learner.synthetic import random_task_batch, split_columns
from mtrl.sync.gossip import GossipSync
from mtrl.sync.loose_sync import PeriodicSync

REWARD_SCALES = [1.0, 100.0, 0.1, 10.0]


def config(sync: str = "allreduce", every: int = 1, **extra: Any) -> LearnerConfig:
    parallel = {"sync": sync, "sync_every": every}
    for key in ("outer_learning_rate", "outer_momentum"):
        if key in extra:
            parallel[key] = extra.pop(key)
    return LearnerConfig.model_validate({**CFG, **extra, "parallel": parallel})


#: A linear optimiser, no clipping, no PopArt and no entropy multipliers: one local SGD step
#: averaged over the replicas is then the all-reduced step exactly.
LINEAR = {
    "optimizer": "sgd",
    "learning_rate": 0.05,
    "max_grad_norm": 1e9,
    "popart": {"enabled": False},
    "entropy_floor": 0.0,
    "saturation_ceiling": 1.0,
}


def shard(step: int, rank: int, end_prob: float = 0.1) -> list[TaskBatch]:
    """Rank ``rank``'s half of every task's 4 columns at update ``step``; with ``end_prob``
    0 no episode ends, so every step is valid and the ranks' counts are equal."""
    out = []
    for task, space in enumerate(SPACES):
        whole = random_task_batch(
            task,
            space,
            UNROLL,
            4,
            seed=100 * step + task,
            reward_scale=REWARD_SCALES[task],
            policy_version=step,
            end_prob=end_prob,
        )
        out.append(split_columns(whole, WORLD)[rank])
    return out


def model() -> MultiTaskModel:
    torch.manual_seed(0)
    return MultiTaskModel(SPACES, config().model)


def gather(x: Any) -> list[Any]:
    box: list[Any] = [None] * WORLD
    dist.all_gather_object(box, x)
    return box


def state_of(learner: Any) -> dict[str, Any]:
    s = learner.replica_state()
    return {
        "params": s.params.clone(),
        "stats": s.stats.clone(),
        "seen": s.seen.clone(),
        "model": {k: v.detach().clone() for k, v in learner.model.state_dict().items()},
        "mu": learner.mu.clone(),
        "nu": learner.nu.clone(),
    }


def equivalence(ctx: DistContext) -> dict[str, Any]:
    """local_sgd with H = 1 beside the all-reduce learner, on the same shards."""
    local = make_impala_learner(model(), config("local_sgd", 1, **LINEAR), NAMES, ctx)
    sync = PeriodicSync(local, ctx, every=1)
    reduced = make_impala_learner(model(), config("allreduce", **LINEAR), NAMES, ctx)
    for step in range(3):
        local.update(shard(step, ctx.rank, end_prob=0.0))
        assert sync.after_update(0)
        reduced.update(shard(step, ctx.rank, end_prob=0.0))
    return {"local": state_of(local), "allreduce": state_of(reduced), "syncs": sync.syncs}


def periodic(ctx: DistContext, sync_kind: str, **outer: float) -> dict[str, Any]:
    """Four updates with H = 2 (PopArt, Adam, clipping on): the states right before each
    sync and right after."""
    cfg = config(sync_kind, 2, **outer)
    learner = make_impala_learner(model(), cfg, NAMES, ctx)
    p = cfg.parallel
    if sync_kind == "diloco":
        sync = PeriodicSync(learner, ctx, 2, p.outer_learning_rate, p.outer_momentum)
    else:
        sync = PeriodicSync(learner, ctx, 2)
    start = state_of(learner)
    before, after, synced = [], [], []
    for step in range(4):
        learner.update(shard(step, ctx.rank))
        pre = state_of(learner)
        synced.append(sync.after_update(0))
        if synced[-1]:
            before.append(gather(pre))
            after.append(state_of(learner))
    return {"start": start, "before": before, "after": after, "synced": synced}


def resume(ctx: DistContext) -> dict[str, Any]:
    """DiLoCo with H = 2, saved after 3 updates (mid-period); 3 more in the saved learner and
    in a fresh one that loaded the learner's and the sync's state: both must end equal."""
    cfg = config("diloco", 2, outer_learning_rate=0.7, outer_momentum=0.9)
    p = cfg.parallel

    def pair() -> tuple[Any, PeriodicSync]:
        learner = make_impala_learner(model(), cfg, NAMES, ctx)
        return learner, PeriodicSync(learner, ctx, 2, p.outer_learning_rate, p.outer_momentum)

    learner, sync = pair()
    for step in range(3):
        learner.update(shard(step, ctx.rank))
        sync.after_update(0)
    buf = io.BytesIO()  # a round trip through bytes, as a checkpoint file does
    torch.save({"learner": learner.state_dict(), "sync": sync.state_dict()}, buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    fresh, fresh_sync = pair()
    with torch.no_grad():
        for q in fresh.model.parameters():
            q.add_(0.5)
    fresh.load_state_dict(state["learner"])
    fresh_sync.load_state_dict(state["sync"])
    for step in range(3, 6):
        for lrn, s in ((learner, sync), (fresh, fresh_sync)):
            lrn.update(shard(step, ctx.rank))
            s.after_update(0)
    return {"continued": state_of(learner), "resumed": state_of(fresh), "syncs": sync.syncs}


def gossip(ctx: DistContext, out: Path) -> dict[str, Any]:
    """Rank 1 is a straggler that takes no step until rank 0 has made all of its: rank 0's
    sends must never wait for it. Then rank 1 trains, mixing what rank 0 sent."""
    learner = make_impala_learner(model(), config("async", 2), NAMES, ctx)
    sync = GossipSync(learner, ctx, every=2)
    flag = out / "gossip_rank0_done"
    if ctx.rank == 1:
        while not flag.exists():  # the straggler: stalled on the condition, not a clock
            time.sleep(0.05)
    for step in range(12):
        learner.update(shard(step, ctx.rank))
        sync.after_update(env_steps=100 * (step + 1))
        if ctx.rank == 1 and step == 0:
            before_mix = sync.mixed
    if ctx.rank == 0:
        flag.touch()
    figures = {
        "sent": sync.sent,
        "dropped": sync.dropped,
        "mixed": sync.mixed,
        "global_steps": sync.global_steps(1200),
        "before_mix": before_mix if ctx.rank == 1 else None,
    }
    sync.finish(env_steps=1200)
    return {**figures, "final": state_of(learner)}


def main(out: Path, scenarios: list[str]) -> None:
    torch.set_num_threads(1)
    ctx = DistContext.from_env()
    ctx.init(torch.device("cpu"), timeout_s=120)
    try:
        for name in scenarios:
            if name == "equivalence":
                result = equivalence(ctx)
            elif name == "local_sgd":
                result = periodic(ctx, "local_sgd")
            elif name == "diloco":
                result = periodic(ctx, "diloco", outer_learning_rate=0.7, outer_momentum=0.9)
            elif name == "resume":
                result = resume(ctx)
            elif name == "gossip":
                result = gossip(ctx, out)
            else:
                raise SystemExit(f"unknown scenario {name}")
            torch.save(result, out / f"{name}_rank{ctx.rank}.pt")
    except BaseException:
        ctx.destroy(wait_for_peers=False)
        raise
    dist.barrier()  # every result on disk; leave without gloo's teardown (dist_worker.py)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
