"""Periodic resets of a SAC learner (``learner.sac.reset_every``, ``learner.sac.reset``): what
is re-initialised, and how, without breaking what holds on to the live tensors.

The new values come from a fresh policy and twin critic built from the same model config and
spaces (so every layer gets the initialiser and gain it was built with: orthogonal weights,
zero biases) and are copied *in place* into the live parameters. Nothing is replaced: the
stacked step's per-task modules alias slices of its stacked weights
(:class:`~mtrl.learner.stacked.LinearStack`), the optimisers hold the parameter objects, a
recorded CUDA graph (:mod:`mtrl.algorithms.sac.graphed`) reads and writes fixed addresses, and
all of them stay valid. The optimisers' moments and step counts are zeroed in place for the
same reason, which is exactly Adam's state before its first step. Buffers (no learned values)
are kept.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from mtrl.algorithms.sac.critic_output import critic_bins
from mtrl.algorithms.sac.networks import TwinCritic, install_policy_heads
from mtrl.learner.model import MultiTaskModel

__all__ = ["reset"]


def _copy_parameters(live: nn.Module, fresh: nn.Module) -> None:
    """``fresh``'s parameter values into ``live``'s, in place, name by name."""
    new = dict(fresh.named_parameters())
    names = [name for name, _ in live.named_parameters()]
    if sorted(names) != sorted(new):
        raise RuntimeError(f"a fresh {type(live).__name__} has other parameters than the live one")
    for name, p in live.named_parameters():
        p.copy_(new[name])


def _clear_optimizer(opt: torch.optim.Optimizer) -> None:
    """Zero every state tensor of ``opt`` in place (Adam's moments and step counts: its state
    before its first step)."""
    for state in opt.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                value.zero_()


def reset(learner: Any) -> None:
    """Re-initialise what ``learner.sac.reset`` names in a
    :class:`~mtrl.algorithms.sac.learner.SacLearner`, in place (see the module docstring)."""
    cfg, sac = learner.cfg, learner.sac
    with torch.no_grad():
        fresh = MultiTaskModel(learner.spaces, cfg.model)
        install_policy_heads(fresh)
        _copy_parameters(learner.model, fresh)
        critic = TwinCritic(fresh, cfg.model, sac.critic_action, critic_bins(sac))
        _copy_parameters(learner.critic, critic)
        learner._share_reset()
        torch._foreach_copy_(learner.target_params, learner.critic_params)
        optimizers = [learner.actor_opt, learner.critic_opt]
        if sac.reset == "all":
            learner.log_alpha.fill_(math.log(sac.initial_alpha))
            optimizers.append(learner.alpha_opt)
            if learner.famo is not None:
                learner.famo.logits.zero_()
                optimizers.append(learner.famo.opt)
        for opt in optimizers:
            _clear_optimizer(opt)
