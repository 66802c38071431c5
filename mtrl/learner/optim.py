"""The learner's optimiser and its parameter groups (per-task step sizes).

Adam (and RMSProp) divide each parameter's gradient by a running estimate of its own size,
so each parameter moves by about the step size whatever its gradient's scale. A task's
weight in the loss therefore cannot make the parameters that only that task uses — its
encoder, policy head and own recurrent core — learn faster or slower: scaling a task's loss
scales those gradients and their running size alike. A per-task multiplier on the step size
can, and that is what ``TaskConfig.learning_rate_scale`` sets. The shared torso, the value
rows (one tensor for all tasks) and a shared core keep the plain rate.

Adam runs fused (``fused=True``: one kernel for every parameter's step) where every parameter
is a plain CPU or CUDA tensor: a GPU's update is launch-bound, and the unfused step launches
several kernels per group of tensors (on a CPU it loops over the tensors in Python).
:data:`FUSED_ADAM` turns it off, to compare (``benchmarks/learner_update.py --fused``).
:func:`adam_step` takes a fused Adam's step on the CPU without ``Optimizer.step``'s own Python
around the kernel, for learners that step many times per update (SAC).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from mtrl.config import LearnerConfig

__all__ = [
    "FUSED_ADAM",
    "adam_step",
    "clear_grads",
    "group_order",
    "load_optimizer_state",
    "make_optimizer",
    "optimizer_params",
    "optimizer_state",
    "param_groups",
    "regroup_optimizer_state",
    "set_learning_rate",
]

FUSED_ADAM = True
"""Fuse Adam's step where every parameter is a plain CPU or CUDA tensor (module docstring)."""


def group_order(lr_scale: float) -> tuple[bool, float]:
    """Sort key of the groups: scale 1 (the shared parameters) first, then ascending."""
    return (lr_scale != 1.0, lr_scale)


def param_groups(
    model: nn.Module, lr_scales: Sequence[float] | None = None
) -> list[dict[str, Any]]:
    """``model``'s parameters as optimiser groups, one per step-size multiplier (``lr_scale``).

    The first group holds the shared parameters and those of tasks at scale 1; then one group
    per other scale (ascending) of the parameters only its tasks use
    (``model.task_parameters(k)``). Groups with no parameters here (a task-sharded replica
    whose tasks at that scale live on other ranks) are left out: the ranks' optimiser states
    merge by ``lr_scale`` (:func:`mtrl.algorithms.impala.sharding.merge_optimizer_states`).
    """
    params = list(model.parameters())
    scales = [float(s) for s in lr_scales or ()]
    if all(s == 1.0 for s in scales):
        return [{"params": params, "lr_scale": 1.0}]
    if not hasattr(model, "task_parameters"):
        raise ValueError(
            f"per-task learning-rate scales {scales} need a model with task_parameters(task); "
            f"{type(model).__name__} has none"
        )
    scale_of = {id(p): s for k, s in enumerate(scales) for p in model.task_parameters(k)}
    by_scale: dict[float, list[nn.Parameter]] = {1.0: []}
    for p in params:
        by_scale.setdefault(scale_of.get(id(p), 1.0), []).append(p)
    order = sorted(by_scale, key=group_order)
    return [{"params": by_scale[s], "lr_scale": s} for s in order if by_scale[s]]


def make_optimizer(
    params: Sequence[nn.Parameter] | Sequence[dict[str, Any]], cfg: LearnerConfig
) -> torch.optim.Optimizer:
    """The optimiser the config names, over ``params`` (tensors, or :func:`param_groups`,
    whose ``lr_scale`` multiplies the step size of its group)."""
    groups = list(params)
    if groups and isinstance(groups[0], dict):
        groups = [{**g, "lr": cfg.learning_rate * g.get("lr_scale", 1.0)} for g in groups]
    if cfg.optimizer == "adam":
        fused = FUSED_ADAM and _fusable(groups)
        return torch.optim.Adam(groups, lr=cfg.learning_rate, eps=1e-5, fused=fused or None)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.learning_rate)
    return torch.optim.RMSprop(groups, lr=cfg.learning_rate, eps=0.01, alpha=0.99)


def _fusable(groups: Sequence[Any]) -> bool:
    """Whether every parameter (of tensors or of groups' ``params``) is a plain floating tensor
    on the CPU or on CUDA, as fused Adam takes them (not sharded DTensors, not XLA)."""
    params = [p for g in groups for p in (g["params"] if isinstance(g, dict) else [g])]
    return bool(params) and all(
        type(p) in (torch.Tensor, nn.Parameter)
        and p.device.type in ("cpu", "cuda")
        and p.is_floating_point()
        for p in params
    )


def optimizer_params(optimizer: torch.optim.Optimizer, model: nn.Module) -> list[int]:
    """For each parameter ``optimizer`` steps, in its order (its state's keys), the index of
    that parameter in ``model.parameters()``: what ties a saved optimiser state to the
    parameters when the groups change."""
    index = {id(p): i for i, p in enumerate(model.parameters())}
    return [index[id(p)] for g in optimizer.param_groups for p in g["params"]]


def regroup_optimizer_state(
    saved: dict[str, Any],
    saved_params: Sequence[int],
    optimizer: torch.optim.Optimizer,
    model: nn.Module,
) -> dict[str, Any]:
    """``saved`` (an optimiser state dict whose slot ``k`` held ``model`` parameter
    ``saved_params[k]``) as a state dict for ``optimizer``, whose groups split the parameters
    otherwise (other per-task learning-rate scales: a run of population-based training copying
    a member that scaled its tasks differently). Each parameter keeps its own moments; the
    groups and their hyperparameters are ``optimizer``'s."""
    slot_of = {param: slot for slot, param in enumerate(saved_params)}
    state = {}
    for slot, param in enumerate(optimizer_params(optimizer, model)):
        old = slot_of.get(param)
        if old is not None and old in saved["state"]:
            state[slot] = saved["state"][old]
    return {"state": state, "param_groups": optimizer.state_dict()["param_groups"]}


def optimizer_state(optimizer: torch.optim.Optimizer, model: nn.Module) -> dict[str, Any]:
    """``optimizer``'s state dict, and which ``model`` parameter each of its slots holds (so
    that it loads into other groups: :func:`load_optimizer_state`)."""
    return {
        "optimizer": optimizer.state_dict(),
        "optimizer_params": torch.tensor(optimizer_params(optimizer, model)),
    }


def load_optimizer_state(
    optimizer: torch.optim.Optimizer, model: nn.Module, state: dict[str, Any]
) -> None:
    """Load what :func:`optimizer_state` saved, regrouped parameter by parameter where the
    groups differ (checkpoints before the slot record load as they are)."""
    saved, params = state["optimizer"], state.get("optimizer_params")
    if params is not None and params.tolist() != optimizer_params(optimizer, model):
        saved = regroup_optimizer_state(saved, params.tolist(), optimizer, model)
    optimizer.load_state_dict(saved)


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the step size: ``lr`` times each group's ``lr_scale`` (1 where it has none)."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)


def adam_step(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.step()``; for a fused Adam on CPU tensors whose state exists, the two calls
    its step comes down to (the step counts' increment and the fused kernel, exactly as
    ``torch.optim.adam._fused_adam`` makes them), without the hooks, checks and grouping around
    them: on one CPU core those took ~0.8 ms of a ~14 ms MT10-shaped SAC gradient step for its
    three optimisers. Anything else (CUDA, a recorded step, AMSGrad, a parameter without state
    yet) takes ``optimizer.step()``."""
    if not _direct(optimizer):
        optimizer.step()
        return
    calls = []
    for group in optimizer.param_groups:
        params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            state = optimizer.state[p]
            if "step" not in state:  # its first step makes its state
                optimizer.step()
                return
            params.append(p)
            grads.append(p.grad)
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            steps.append(state["step"])
        if params:
            calls.append((group, params, grads, exp_avgs, exp_avg_sqs, steps))
    for group, params, grads, exp_avgs, exp_avg_sqs, steps in calls:
        beta1, beta2 = group["betas"]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            [],
            steps,
            amsgrad=False,
            lr=group["lr"],
            beta1=beta1,
            beta2=beta2,
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=False,
            grad_scale=None,
            found_inf=None,
        )


def clear_grads(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.zero_grad(set_to_none=True)`` without its profiler region and hooks (a
    tenth of a millisecond a call: SAC clears three optimisers' gradients every step)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = None


_DIRECT: weakref.WeakKeyDictionary[torch.optim.Optimizer, bool] = weakref.WeakKeyDictionary()


def _direct(optimizer: torch.optim.Optimizer) -> bool:
    """Whether :func:`adam_step` may call the fused kernel itself (its docstring; the
    optimiser's settings and parameters checked once)."""
    known = _DIRECT.get(optimizer)
    if known is None:
        known = _DIRECT[optimizer] = _fused_cpu_adam(optimizer)
    return known


def _fused_cpu_adam(optimizer: torch.optim.Optimizer) -> bool:
    if type(optimizer) is not torch.optim.Adam:
        return False
    for group in optimizer.param_groups:
        if not group.get("fused") or group.get("capturable") or group.get("amsgrad"):
            return False
        if group.get("maximize") or group.get("differentiable"):
            return False
        if group.get("decoupled_weight_decay") or isinstance(group["lr"], torch.Tensor):
            return False
        if any(p.device.type != "cpu" or p.dtype != torch.float32 for p in group["params"]):
            return False
    return True
