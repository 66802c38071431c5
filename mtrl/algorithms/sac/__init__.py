"""Multi-task soft actor-critic (``learner.algorithm: sac``): per-task replay, twin critics
with Polyak-averaged targets, a learned temperature per task, squashed-Gaussian policies for
``Box`` actions and SAC-discrete for ``Discrete`` ones. docs/ALGORITHMS.md describes it."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from mtrl.algorithms.sac.checks import check_config
from mtrl.algorithms.sac.learner import SacLearner
from mtrl.algorithms.sac.parallel import DataParallelSacLearner
from mtrl.algorithms.sac.settings import SacSettings
from mtrl.config import LearnerConfig
from mtrl.errors import ConfigError, UserError
from mtrl.learner.distributed import DistContext

__all__ = ["DataParallelSacLearner", "SacLearner", "SacSettings", "make_sac_learner"]


def make_sac_learner(
    model: nn.Module,
    cfg: LearnerConfig,
    task_names: Sequence[str],
    ctx: DistContext | None = None,
    device: torch.device | None = None,
    lr_scales: Sequence[float] | None = None,
    settings: SacSettings | None = None,
) -> SacLearner:
    """The SAC learner of ``model`` on ``device``: one process's, or under torchrun one
    data-parallel replica (:mod:`mtrl.algorithms.sac.parallel`; the process group must be
    initialised). ``settings``: the validated ``learner.sac`` section (None: read from
    ``cfg``); the learner reads it as ``cfg.sac``."""
    if settings is None:
        settings = cfg.settings("sac", SacSettings)
    problems = check_config(cfg, settings)
    if problems:
        raise ConfigError("\n".join(problems), problems=problems)
    cfg = cfg.with_settings("sac", settings)
    ctx = ctx or DistContext.from_env()
    par = cfg.parallel
    model = model.to(device) if device is not None else model
    if not ctx.distributed:
        if par.data_parallel > 1:
            raise UserError(
                f"learner.parallel.data_parallel is {par.data_parallel} but this process is the "
                f"only replica: launch with `mtrl train CONFIG --nproc {par.data_parallel}` "
                "(see docs/DISTRIBUTED.md)"
            )
        return SacLearner(model, cfg, task_names, lr_scales)
    if par.model_parallel != "none":
        raise UserError(
            f"learner.algorithm: sac supports data parallel replicas only, not "
            f"learner.parallel.model_parallel: {par.model_parallel}"
        )
    if par.data_parallel not in (1, ctx.local_world_size):
        raise UserError(
            f"learner.parallel.data_parallel is {par.data_parallel} but torchrun started "
            f"{ctx.local_world_size} replicas on this node; make them agree (or set it to 1)"
        )
    return DataParallelSacLearner(model, cfg, task_names, ctx, lr_scales)
