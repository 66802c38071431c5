"""An optimiser's state keyed by the modules' parameter names, whatever tensors it steps.

``torch.optim.Optimizer.state_dict`` keys each parameter's state (Adam's moments and step
count) by its position in the optimiser's list. A learner whose optimiser steps other tensors
than its modules' parameters cannot load such a state saved by one that steps the modules
themselves: SAC's stacked step (:mod:`mtrl.algorithms.sac.stacked_step`) steps ``[G, ...]``
stacks that the per-task modules' parameters alias (:class:`~mtrl.learner.stacked.LinearStack`),
the per-task step steps the modules' own parameters, and which one a learner takes depends on
its device and its tasks — a run trained on a GPU and resumed on a CPU, or a release that
stacks one more layer, would meet a state of another layout.

Here the state is written per *named* parameter of the modules, in that parameter's own shape
(each alias's slice of its stack's moments, in the alias's layout), and read back into whichever
tensors the loading optimiser steps: a stack's moments are assembled from its members', a
module's own parameter takes its entry as it is. A parameter is found by the storage it shares
with the optimiser's tensor, so the same code serves both layouts and any mix of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

__all__ = ["BY_NAME", "check_positional", "load_named_state", "named_state"]

BY_NAME = "by_name"
"""The key of :func:`named_state`'s per-name states (a positional ``state_dict`` has none)."""

Named = Iterable[tuple[str, torch.Tensor]]
"""``(name, parameter)`` pairs, as ``nn.Module.named_parameters`` gives them."""


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The storage elements ``t`` reaches: ``[first, last]``."""
    last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    return t.storage_offset(), last


def _owners(params: Sequence[torch.Tensor], named: Named) -> list[list[tuple[str, torch.Tensor]]]:
    """For each of the optimiser's ``params``, the named parameters that are (or alias part
    of) it; a named parameter that shares no storage with any is not the optimiser's (SAC's
    unused state-value head, a frozen layer) and is left out."""
    by_storage: dict[int, list[int]] = {}
    for i, p in enumerate(params):
        by_storage.setdefault(p.untyped_storage().data_ptr(), []).append(i)
    owned: list[list[tuple[str, torch.Tensor]]] = [[] for _ in params]
    for name, p in named:
        first, last = _span(p)
        for i in by_storage.get(p.untyped_storage().data_ptr(), []):
            lo, hi = _span(params[i])
            if lo <= first and last <= hi:
                owned[i].append((name, p))
                break
    for i, (p, members) in enumerate(zip(params, owned, strict=True)):
        covered = sum(m.numel() for _, m in members)
        if covered != p.numel():
            raise ValueError(
                f"the optimiser's tensor {i} {tuple(p.shape)} is {covered} of {p.numel()} "
                "elements named parameters (its state cannot be written by name)"
            )
    return owned


def _view(state: torch.Tensor, owner: torch.Tensor, member: torch.Tensor) -> torch.Tensor:
    """``member``'s part of ``state``, a tensor laid out as ``owner`` (which ``member``
    aliases), in ``member``'s shape and layout."""
    if state.shape != owner.shape or state.stride() != owner.stride():
        raise ValueError(
            f"a state of {tuple(state.shape)} strides {state.stride()} is not laid out as its "
            f"parameter ({tuple(owner.shape)} strides {owner.stride()})"
        )
    offset = state.storage_offset() + member.storage_offset() - owner.storage_offset()
    return state.as_strided(member.shape, member.stride(), offset)


def _elementwise(key: str, value: Any, param: torch.Tensor) -> bool:
    """Whether a state entry holds one number per element of its parameter (Adam's moments),
    not one for the whole tensor (its step count)."""
    return key != "step" and isinstance(value, torch.Tensor) and value.shape == param.shape


def _copy(key: str, value: Any, param: torch.Tensor, member: torch.Tensor) -> Any:
    """A state entry of ``param`` as ``member``'s own copy (its slice of the moments; the
    whole step count)."""
    if _elementwise(key, value, param):
        return _view(value, param, member).clone()
    return value.clone() if isinstance(value, torch.Tensor) else value


def _params(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for g in opt.param_groups for p in g["params"]]


def named_state(opt: torch.optim.Optimizer, named: Named) -> dict[str, Any]:
    """``opt``'s state per named parameter (``named``: the modules' parameters, which are or
    alias the tensors ``opt`` steps): ``{"by_name": {name: {key: value}}, "param_groups":
    [{hyperparameters, "params": [names]}]}``, every tensor a copy in its parameter's shape."""
    params = _params(opt)
    owned = _owners(params, named)
    saved = opt.state_dict()
    group_of = {i: gi for gi, g in enumerate(saved["param_groups"]) for i in g["params"]}
    groups = [{**g, "params": []} for g in saved["param_groups"]]
    state: dict[str, dict[str, Any]] = {}
    for i, (p, members) in enumerate(zip(params, owned, strict=True)):
        groups[group_of[i]]["params"] += [name for name, _ in members]
        entry = saved["state"].get(i)
        if entry is None:  # not stepped yet: no state
            continue
        for name, member in members:
            state[name] = {key: _copy(key, value, p, member) for key, value in entry.items()}
    return {BY_NAME: state, "param_groups": groups}


def load_named_state(opt: torch.optim.Optimizer, named: Named, saved: dict[str, Any]) -> None:
    """Load into ``opt`` a state that :func:`named_state` wrote, whichever tensors the saving
    optimiser stepped; a parameter with no entry anywhere starts fresh. Raises ValueError
    naming what does not fit (a parameter missing from a stepped state, another shape)."""
    params = _params(opt)
    owned = _owners(params, named)
    entries: dict[str, dict[str, Any]] = saved[BY_NAME]
    group_of = {name: gi for gi, g in enumerate(saved["param_groups"]) for name in g["params"]}
    state: dict[int, dict[str, Any]] = {}
    for i, (p, members) in enumerate(zip(params, owned, strict=True)):
        have = [name for name, _ in members if name in entries]
        if not have:
            continue
        if len(have) != len(members):
            missing = next(name for name, _ in members if name not in entries)
            raise ValueError(f"the saved optimiser state has {have[0]} but not {missing}")
        first = entries[have[0]]
        out: dict[str, Any] = {}
        for key, value in first.items():
            if not isinstance(value, torch.Tensor):
                out[key] = value
                continue
            if key == "step":  # each tensor its own count: a fused step adds 1 to each
                out[key] = value.clone()
                continue
            full = torch.empty_strided(p.shape, p.stride(), dtype=value.dtype)
            for name, member in members:
                part = entries[name][key]
                if part.shape != member.shape:
                    raise ValueError(
                        f"the saved optimiser state of {name} is {tuple(part.shape)}, "
                        f"the parameter {tuple(member.shape)}"
                    )
                _view(full, p, member).copy_(part)
            out[key] = full
        state[i] = out
    groups = []
    at = 0
    for g in opt.param_groups:
        ids = list(range(at, at + len(g["params"])))
        at += len(ids)
        names = [name for i in ids for name, _ in owned[i]]
        source = next((group_of[n] for n in names if n in group_of), None)
        hyper = saved["param_groups"][source] if source is not None else g
        groups.append({**{k: v for k, v in hyper.items() if k != "params"}, "params": ids})
    opt.load_state_dict({"state": state, "param_groups": groups})


def check_positional(opt: torch.optim.Optimizer, saved: dict[str, Any]) -> None:
    """Raise ValueError where a positional ``state_dict`` (torch's own, as older checkpoints
    hold) does not fit ``opt``'s tensors: another count, or a state of another shape at some
    position (which torch's loader would take silently and fail on, or mislearn with, later)."""
    params = _params(opt)
    count = sum(len(g["params"]) for g in saved["param_groups"])
    if count != len(params):
        raise ValueError(
            f"the saved optimiser state is for {count} tensors, this learner steps {len(params)}"
        )
    for i, entry in saved["state"].items():
        p = params[int(i)]
        for key, value in entry.items():
            if key != "step" and isinstance(value, torch.Tensor) and value.shape != p.shape:
                raise ValueError(
                    f"the saved optimiser state's tensor {i} is {tuple(value.shape)}, "
                    f"this learner's {tuple(p.shape)}"
                )
