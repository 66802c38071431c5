"""Multi-task soft actor-critic (``learner.algorithm: sac``): per-task replay, twin critics
with Polyak-averaged targets, a learned temperature per task, squashed-Gaussian policies for
``Box`` actions and SAC-discrete for ``Discrete`` ones. docs/ALGORITHMS.md describes it."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from mtrl.algorithms.sac.learner import SacLearner
from mtrl.config import LearnerConfig
from mtrl.errors import UserError
from mtrl.learner.distributed import DistContext

__all__ = ["SacLearner", "make_sac_learner"]


def make_sac_learner(
    model: nn.Module,
    cfg: LearnerConfig,
    task_names: Sequence[str],
    ctx: DistContext | None = None,
    device: torch.device | None = None,
    lr_scales: Sequence[float] | None = None,
) -> SacLearner:
    """The SAC learner of ``model`` on ``device`` (one learner process only)."""
    if ctx is not None and ctx.distributed:
        raise UserError(
            f"learner.algorithm: sac runs on one learner process, but torchrun started "
            f"{ctx.world_size}; launch `mtrl train` without torchrun"
        )
    return SacLearner(model.to(device) if device is not None else model, cfg, task_names, lr_scales)
