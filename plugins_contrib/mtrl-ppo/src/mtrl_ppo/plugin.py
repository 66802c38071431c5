"""The hook: registers the learning rule ``ppo`` with its settings model.

Registration imports nothing heavy beyond what mtrl itself loads (every mtrl process loads
plugins, spawned actor workers too); the factory runs once per learner process.
"""

from __future__ import annotations

import inspect
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
    lr_scales: Sequence[float] | None = None,
    settings: PpoSettings | None = None,
) -> PpoLearner:
    """The PPO learner of ``model`` on ``device`` for this process. ``settings``: the
    validated ``learner.ppo:`` section (None: the defaults). One process only: a replica of a
    torchrun job is refused in one line."""
    if ctx is not None and getattr(ctx, "distributed", False):
        raise UserError(
            "learner.algorithm: ppo runs on one learner process: launch without torchrun "
            "(learner.parallel.data_parallel: 1)"
        )
    if device is not None:
        model = model.to(device)
    return PpoLearner(model, cfg, task_names, settings or PpoSettings(), lr_scales)  # type: ignore[arg-type]


def _host_takes_settings(register: Any) -> bool:
    """Whether this mtrl's registrar accepts a rule's ``settings=`` model."""
    try:
        return "settings" in inspect.signature(register.algorithm).parameters
    except (TypeError, ValueError):
        return False


@hookimpl
def mtrl_register_algorithms(register: Any) -> None:
    """Offer ``ppo`` (settings: :class:`PpoSettings`, the config's ``learner.ppo:``)."""
    kwargs: dict[str, Any] = {"parallel": (), "description": DESCRIPTION}
    # SHIM (remove once every supported mtrl validates rule sections, issue 53 item 1): an mtrl
    # whose registrar has no ``settings=`` calls the factory with six arguments, and the rule
    # then runs on PpoSettings' defaults.
    if _host_takes_settings(register):
        kwargs["settings"] = PpoSettings
    register.algorithm(NAME, make_ppo_learner, **kwargs)
