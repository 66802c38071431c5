"""IMPALA's loss for one task's block, as a pure function of tensors (no modules, no state).

The learner (:mod:`mtrl.algorithms.impala.learner`) computes the inputs — the target policy's
log-probabilities of the taken actions, the V-trace advantages in the task's value scale, the
normalised value predictions and targets, the policy's entropy — and the per-task weights;
this module turns them into the four sums the update adds up over tasks:

* policy gradient ``−Σ log π(a|s) · A · w`` (``A`` held constant);
* value ``½ Σ (n − ŷ)² · w · f_v`` (``f_v`` = (σ / scale)², PopArt's normalised error kept in
  the task's slow-falling value scale);
* entropy ``Σ H · w``, and the bonus ``Σ H · w · b`` in units of the run's bonus unit (``b`` the
  task's bonus weight: its plain coefficient times σ / scale plus its entropy boost − 1).

Sums over the valid (non-reset) steps, not means: replicas divide by the count of the whole
batch. :func:`loss` combines them as the update minimises them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["LossInputs", "LossSums", "loss", "task_loss_sums"]


@dataclass(frozen=True)
class LossInputs:
    """One task block's ``[T, N]`` tensors the loss reads (and the diagnostics after it)."""

    logp: torch.Tensor
    """Target policy's log-probability of the taken actions (differentiable)."""
    advantages: torch.Tensor
    """V-trace policy-gradient advantages divided by the task's value scale (constant)."""
    value: torch.Tensor
    """Normalised value predictions of the (rescaled) head (differentiable)."""
    target: torch.Tensor
    """Normalised V-trace value targets (constant)."""
    entropy: torch.Tensor
    """The policy's entropy per step (differentiable)."""
    valid: torch.Tensor
    """Bool: false on reset steps, which enter no sum."""


@dataclass(frozen=True)
class LossSums:
    """Policy-gradient, value, entropy and entropy-bonus sums of one block (or of several)."""

    policy: torch.Tensor
    value: torch.Tensor
    entropy: torch.Tensor
    bonus: torch.Tensor

    def __add__(self, other: LossSums) -> LossSums:
        return LossSums(
            self.policy + other.policy,
            self.value + other.value,
            self.entropy + other.entropy,
            self.bonus + other.bonus,
        )

    def as_tensor(self) -> torch.Tensor:
        """The four sums as one detached float64 ``[4]`` (what metrics reduce over replicas)."""
        return torch.stack([self.policy, self.value, self.entropy, self.bonus]).detach().double()


def task_loss_sums(
    x: LossInputs,
    weight: float,
    value_factor: torch.Tensor,
    bonus_weight: torch.Tensor,
) -> LossSums:
    """The four sums of one block: ``weight`` is the task's loss weight (the data mix's
    correction), ``value_factor`` its (σ / scale)², ``bonus_weight`` its entropy-bonus
    weight in bonus units."""
    mask = x.valid.to(x.logp.dtype)
    pg = -(x.logp * x.advantages * mask).sum() * weight
    v = 0.5 * ((x.value - x.target) ** 2 * mask).sum() * weight * value_factor
    ent = (x.entropy * mask).sum() * weight
    return LossSums(pg, v, ent, ent * bonus_weight)


def loss(sums: LossSums, count: int, value_coef: float, bonus_unit: float) -> torch.Tensor:
    """The minimised loss: ``(policy + value_coef · value − bonus_unit · bonus) / count``."""
    return (sums.policy + value_coef * sums.value - bonus_unit * sums.bonus) / max(count, 1)
