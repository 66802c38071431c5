"""The categorical critic's math as pure functions (``learner.sac.critic: categorical``).

A categorical critic (C51, Bellemare et al. 2017; as a classification loss for values,
Farebrother et al. 2024, "Stop Regressing"; BRC, Nauman et al. 2025) outputs logits over a
fixed support of ``num_bins`` values evenly spaced on ``[v_min, v_max]``; its ``Q`` is the
expectation under their softmax (:func:`expected`). The scalar soft target ``y`` (from the smaller
of the twin target critics' expected ``Q``, as SAC takes it) is projected onto the support by
**two-hot** (:func:`two_hot`): ``y`` clipped into the support puts its mass on the two
neighbouring values in the proportions that make their mean exactly ``y``, and each critic's
loss is the cross entropy from that distribution to its logits (:func:`cross_entropy`).
Two-hot rather than HL-Gauss: no smoothing width to choose, and the projection keeps the
target's value exactly, so the critic's expected ``Q`` regresses to the same point the
squared error would.
"""

from __future__ import annotations

import torch

__all__ = ["cross_entropy", "edge_reached", "expected", "support", "two_hot"]


def support(
    v_min: float,
    v_max: float,
    bins: int,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The ``bins`` values evenly spaced on ``[v_min, v_max]``."""
    return torch.linspace(v_min, v_max, bins, device=device, dtype=dtype)


def two_hot(y: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``y`` ``[*B]`` as distributions ``[*B, bins]`` over the evenly spaced ``values``: ``y``
    clipped into ``[values[0], values[-1]]``, its mass on the two values around it, so the
    distribution's mean is the clipped ``y`` and its mass sums to 1 (no host synchronisation:
    a CUDA graph can record it)."""
    bins = values.shape[0]
    lo, hi = values[0], values[-1]
    width = (hi - lo) / (bins - 1)
    position = ((y.to(values.dtype).clamp(lo, hi) - lo) / width).clamp(0, bins - 1)
    lower = position.floor().clamp(max=bins - 2)
    upper_mass = position - lower
    index = lower.long().unsqueeze(-1)
    out = torch.zeros(*y.shape, bins, dtype=values.dtype, device=values.device)
    out.scatter_(-1, index, (1 - upper_mass).unsqueeze(-1))
    return out.scatter_add_(-1, index + 1, upper_mass.unsqueeze(-1))


def expected(logits: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """The expectation ``[*B]`` of ``values`` under ``softmax(logits)`` (``logits [*B, bins]``):
    a categorical critic's ``Q``."""
    return torch.softmax(logits, dim=-1) @ values.to(logits.dtype)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``−Σ_i target_i log softmax(logits)_i`` per row ``[*B]`` (``target`` not
    differentiated)."""
    return -(target.detach() * torch.log_softmax(logits, dim=-1)).sum(-1)


def edge_reached(q_mean: float, v_min: float, v_max: float, bins: int) -> str | None:
    """Which end of the support a task's mean ``Q`` has come within one bin of (``"v_max"``,
    ``"v_min"``), or None. Soft targets beyond an end are clipped to it (:func:`two_hot`), so
    a critic whose values lie past it learns the end instead, and its mean ``Q`` piles up
    there: the sign that the support is too narrow for the task's returns."""
    width = (v_max - v_min) / (bins - 1)
    if q_mean >= v_max - width:
        return "v_max"
    if q_mean <= v_min + width:
        return "v_min"
    return None
