"""FAMO's math as pure functions of tensors: Fast Adaptive Multitask Optimization (Liu, Feng,
Stone and Liu, NeurIPS 2023, "FAMO: Fast Adaptive Multitask Optimization").

FAMO balances ``K`` positive task losses ``ℓ_k`` by the rate at which each falls. Task logits
``ξ`` give weights ``z = softmax(ξ)``; the model steps along the gradient of

    c · Σ_k z_k log(ℓ_k + ε),    c = 1 / Σ_k z_k / (ℓ_k + ε)   (held constant),

that is along ``Σ_k m_k ∇ℓ_k`` with ``m_k = c z_k / (ℓ_k + ε)`` (:func:`loss_scales`): ``c``
makes the multipliers sum to 1, so the direction is a convex combination of the tasks'
gradients, the size of a weighted mean's whatever the losses' scale. Once the model has
stepped, the loss of each task is measured again on the same batch, and the logits step along

    J_softmax(ξ)ᵀ δ,    δ_k = log(ℓ_k^before + ε) − log(ℓ_k^after + ε)

(:func:`logit_gradient`) with Adam and a weight decay on ``ξ``: a task whose log-loss fell
more than the weighted mean of the others loses weight, one that fell less gains it, and the
decay pulls the weights back towards uniform. Tasks absent from a step (``present`` false)
take no part in ``c``, get no multiplier and count as unchanged (``δ_k = 0``).

The losses must be positive and measure each task's progress (a squared error does; a
policy-gradient loss, whose sign and size follow the advantages, does not). The lower bound
``ℓ_k*`` the paper subtracts is 0 here, as it is for a squared error.
"""

from __future__ import annotations

import torch

__all__ = ["logit_gradient", "loss_scales", "task_weights"]


def task_weights(logits: torch.Tensor) -> torch.Tensor:
    """The tasks' weights ``z = softmax(ξ)`` ``[K]`` (they sum to 1) from logits ``[K]``."""
    return torch.softmax(logits, dim=-1)


def loss_scales(
    losses: torch.Tensor, logits: torch.Tensor, present: torch.Tensor, epsilon: float
) -> torch.Tensor:
    """Each task's multiplier ``m_k = c z_k / (ℓ_k + ε)`` ``[K]`` (0 where ``present`` is
    false; they sum to 1), with ``c = 1 / Σ_present z_k / (ℓ_k + ε)``: ``Σ_k m_k ∇ℓ_k`` is the
    gradient of ``c Σ_k z_k log(ℓ_k + ε)``. ``losses`` ``[K]`` (each present task's mean loss)
    and ``logits`` are read, not differentiated."""
    z = task_weights(logits.detach())
    inverse = torch.where(present, z / (losses.detach() + epsilon), 0.0)
    return inverse / inverse.sum()


def logit_gradient(
    logits: torch.Tensor,
    before: torch.Tensor,
    after: torch.Tensor,
    present: torch.Tensor,
    epsilon: float,
) -> torch.Tensor:
    """The logits' gradient ``J_softmax(ξ)ᵀ δ`` ``[K]``, ``δ_k = log(ℓ_k^before + ε) −
    log(ℓ_k^after + ε)`` (0 where ``present`` is false): ``z_k (δ_k − Σ_j z_j δ_j)``. A
    descent step along it lowers the weight of the tasks whose losses fell fastest."""
    z = task_weights(logits.detach())
    delta = torch.where(present, (before + epsilon).log() - (after + epsilon).log(), 0.0)
    return z * (delta - (z * delta).sum())
