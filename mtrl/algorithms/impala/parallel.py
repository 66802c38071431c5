"""The IMPALA learner a config and a process's place among the replicas call for (the
factory the built-in ``impala`` rule registers; :func:`mtrl.algorithms.make_learner` calls it).

Its use::

    ctx = DistContext.from_env()             # torchrun's RANK / WORLD_SIZE / LOCAL_RANK
    device = ctx.device(cfg.learner.device)  # cuda → this local rank's GPU
    ctx.init(device)                         # process group (gloo / nccl / xla); no-op alone
    model = MultiTaskModel(spaces, cfg.learner.model)
    learner = make_impala_learner(model, cfg.learner, names, ctx, device)
    ...                                      # feed it batches of learner.local_tasks
    ctx.destroy()
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from mtrl.algorithms.impala.data_parallel import DataParallelLearner
from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.algorithms.impala.sharding import FSDPLearner, TaskShardedLearner, shard_tasks
from mtrl.config import LearnerConfig
from mtrl.errors import UserError
from mtrl.learner.distributed import DistContext, broadcast_parameters

__all__ = ["make_impala_learner"]


def make_impala_learner(
    model: nn.Module,
    cfg: LearnerConfig,
    task_names: Sequence[str],
    ctx: DistContext | None = None,
    device: torch.device | None = None,
    lr_scales: Sequence[float] | None = None,
) -> ImpalaLearner:
    """The learner for ``cfg.parallel`` in this process; moves ``model`` to ``device``.

    One process: a plain :class:`~mtrl.algorithms.impala.learner.ImpalaLearner` (model
    parallel modes are then the identity).
    Several (torchrun) with ``sync: allreduce``: :class:`DataParallelLearner`,
    :class:`TaskShardedLearner` or :class:`FSDPLearner`; the process group must be
    initialised (:meth:`DistContext.init`).
    With a loosened ``sync``: a plain learner on each replica, all starting from rank 0's
    parameters (:mod:`mtrl.sync.loose_sync` combines them now and then).
    Task sharding drops foreign per-task modules *before* the move, so a device holds only
    its own tasks. ``lr_scales``: per task, a multiplier on the step size of its own
    parameters (:mod:`mtrl.learner.optim`).
    """
    ctx = ctx or DistContext.from_env()
    par = cfg.parallel
    if not ctx.distributed:
        if par.data_parallel > 1:
            raise UserError(
                f"learner.parallel.data_parallel is {par.data_parallel} but this process is the "
                f"only replica: launch with `torchrun --nproc-per-node {par.data_parallel} ...` "
                "(see docs/DISTRIBUTED.md)"
            )
        return ImpalaLearner(
            model.to(device) if device is not None else model, cfg, task_names, lr_scales
        )
    if par.data_parallel not in (1, ctx.local_world_size):
        raise UserError(
            f"learner.parallel.data_parallel is {par.data_parallel} but torchrun started "
            f"{ctx.local_world_size} replicas on this node; make them agree (or set it to 1)"
        )
    if par.sync != "allreduce":  # each replica alone between syncs (mtrl.sync.loose_sync)
        model = model.to(device) if device is not None else model
        broadcast_parameters(model.parameters())  # ... from one start
        return ImpalaLearner(model, cfg, task_names, lr_scales)
    if par.model_parallel == "task_sharded":
        shard_tasks(model, ctx.world_size, ctx.rank)
    if device is not None:
        model = model.to(device)
    kinds: dict[str, type[DataParallelLearner]] = {
        "none": DataParallelLearner,
        "task_sharded": TaskShardedLearner,
        "fsdp": FSDPLearner,
    }
    return kinds[par.model_parallel](model, cfg, task_names, ctx, lr_scales)
