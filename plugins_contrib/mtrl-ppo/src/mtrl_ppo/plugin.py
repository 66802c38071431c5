"""The hook: registers the learning rule ``ppo`` with its settings model.

Registration imports nothing heavy beyond what mtrl itself loads (every mtrl process loads
plugins, spawned actor workers too); the factory runs once per learner process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from mtrl.config import LearnerConfig
from mtrl.errors import UserError
from mtrl.plugins import hookimpl
from mtrl_ppo.learner import PpoLearner
from mtrl_ppo.settings import PpoSettings

NAME = "ppo"
DESCRIPTION = "PPO: clipped surrogate, GAE(λ), epochs over minibatches, per-task PopArt (on-policy)"


def make_ppo_learner(
    model: nn.Module,
    cfg: LearnerConfig,
    task_names: Sequence[str],
    ctx: Any,
    device: torch.device | None,
    lr_scales: Sequence[float] | None,
    settings: PpoSettings,
) -> PpoLearner:
    """The PPO learner of ``model`` on ``device`` for this process. ``settings``: the
    validated ``learner.ppo:`` section (the defaults where the config has none). One process
    only: a replica of a torchrun job is refused in one line."""
    if ctx is not None and getattr(ctx, "distributed", False):
        raise UserError(
            "learner.algorithm: ppo runs on one learner process: launch without torchrun "
            "(learner.parallel.data_parallel: 1)"
        )
    if device is not None:
        model = model.to(device)
    return PpoLearner(model, cfg, task_names, settings, lr_scales)  # type: ignore[arg-type]


def check_config(cfg: LearnerConfig, settings: PpoSettings | None) -> list[str]:
    """What PPO refuses in a learner config, one line each: combining the tasks' gradients
    (``learner.multitask.gradients`` other than ``sum``), which its minibatches, mixing tasks,
    do not take, and FAMO's loss weighting (``learner.multitask.loss_weighting``), which needs
    positive losses that measure progress, as a policy-gradient loss is not — refused rather
    than silently ignored."""
    problems = []
    how = cfg.multitask.gradients
    if how != "sum":
        problems.append(
            f"learner.multitask.gradients: {how} is not supported by ppo (its minibatches mix "
            "the tasks' samples into one loss); use sum, or learner.algorithm: impala or sac"
        )
    weighting = cfg.multitask.loss_weighting
    if weighting != "none":
        problems.append(
            f"learner.multitask.loss_weighting: {weighting} is not supported by ppo (its "
            "policy-gradient loss is not positive and does not measure a task's progress): "
            "use loss_weighting: none, or learner.algorithm: sac"
        )
    return problems


@hookimpl
def mtrl_register_algorithms(register: Any) -> None:
    """Offer ``ppo`` (settings: :class:`PpoSettings`, the config's ``learner.ppo:``; its own
    config check: :func:`check_config`)."""
    register.algorithm(
        NAME,
        make_ppo_learner,
        parallel=(),
        description=DESCRIPTION,
        settings=PpoSettings,
        checks=check_config,
    )
