"""PPO's math as pure functions of tensors: GAE(λ), the clipped surrogate, the (optionally
clipped) value loss, per-task advantage normalisation and the statistics logged with them.

No modules, no state: :mod:`mtrl_ppo.learner` computes the inputs and adds the terms up.
Time-major ``[T, N]`` tensors follow mtrl's unroll convention (:class:`mtrl.learner.batch.
TaskBatch`): when step ``t`` ends an episode, observation ``t + 1`` is that episode's final
one and step ``t + 1`` is a reset step the caller masks out of every loss.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = [
    "Advantages",
    "approx_kl",
    "clip_fraction",
    "clipped_surrogate",
    "gae",
    "normalize_per_task",
    "value_loss",
]


class Advantages(NamedTuple):
    """What :func:`gae` returns, both ``[T, N]`` and detached."""

    advantages: torch.Tensor
    """Â_t, the λ-weighted sum of TD errors."""
    returns: torch.Tensor
    """Â_t + V(x_t): the value targets (the λ-return)."""


@torch.no_grad()
def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    lam: float,
) -> Advantages:
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) over an unroll.

    ``δ_t = r_t + γ (1 − term_t) V(x_{t+1}) − V(x_t)`` and
    ``Â_t = δ_t + γ λ (1 − term_t)(1 − trunc_t) Â_{t+1}``, with ``V(x_T)`` =
    ``bootstrap_value`` and ``Â_T = 0``. Termination zeroes the bootstrap; truncation keeps it
    (``x_{t+1}`` is the final observation, whose value stands in for the rest of the episode)
    but cuts the trace, so nothing of the next episode leaks back.

    Args:
      rewards, values, terminated, truncated: ``[T, N]`` (the flags bool or {0, 1}).
      bootstrap_value: ``[N]``, the value of the observation after the last step.
      gamma, lam: the discount and λ, each in [0, 1].
    """
    if values.ndim != 2 or bootstrap_value.shape != values.shape[1:]:
        raise ValueError(
            f"gae: values must be [T, N] and bootstrap_value [N], got {tuple(values.shape)} "
            f"and {tuple(bootstrap_value.shape)}"
        )
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gae: gamma and lam must lie in [0, 1], got {gamma} and {lam}")
    not_term = 1.0 - terminated.to(values.dtype)
    not_trunc = 1.0 - truncated.to(values.dtype)
    next_values = torch.cat([values[1:], bootstrap_value.unsqueeze(0)])
    deltas = rewards.to(values.dtype) + gamma * not_term * next_values - values
    trace = gamma * lam * not_term * not_trunc
    advantages = torch.empty_like(values)
    acc = torch.zeros_like(bootstrap_value)
    for t in range(values.shape[0] - 1, -1, -1):
        acc = deltas[t] + trace[t] * acc
        advantages[t] = acc
    return Advantages(advantages, advantages + values)


def clipped_surrogate(
    logp: torch.Tensor, behaviour_logp: torch.Tensor, advantages: torch.Tensor, clip: float
) -> torch.Tensor:
    """Per sample, the negated clipped surrogate ``−min(ρ Â, clip(ρ, 1 − ε, 1 + ε) Â)`` with
    ``ρ = exp(logp − behaviour_logp)`` (Schulman et al. 2017, eq. 7): the loss to minimise.

    The ratio is against the policy that acted (the log-probabilities the unroll recorded),
    which is PPO's ratio, and also right when an actor acted a version or more behind."""
    ratio = torch.exp(logp - behaviour_logp)
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip, 1.0 + clip) * advantages
    return -torch.minimum(unclipped, clipped)


def value_loss(
    value: torch.Tensor,
    target: torch.Tensor,
    old_value: torch.Tensor | None = None,
    clip: float | None = None,
) -> torch.Tensor:
    """Per sample, ``½ (V − y)²``; with ``clip``, PPO2's pessimistic clipped form
    ``½ max((V − y)², (V_old + clip(V − V_old, −c, c) − y)²)``."""
    err = (value - target) ** 2
    if clip is None:
        return 0.5 * err
    if old_value is None:
        raise ValueError("value_loss: a clipped value loss needs old_value")
    clipped = old_value + (value - old_value).clamp(-clip, clip)
    return 0.5 * torch.maximum(err, (clipped - target) ** 2)


@torch.no_grad()
def normalize_per_task(
    advantages: torch.Tensor, tasks: torch.Tensor, num_tasks: int, eps: float = 1e-8
) -> torch.Tensor:
    """``advantages`` ``[S]`` standardised within each task (``tasks`` ``[S]`` long): mean 0,
    standard deviation 1 (the unbiased one, as SB3), ``eps`` added to it. A task with a single
    sample is only centred."""
    x = advantages.double()
    ones = torch.ones_like(x)
    count = torch.zeros(num_tasks, dtype=x.dtype, device=x.device).index_add_(0, tasks, ones)
    total = torch.zeros_like(count).index_add_(0, tasks, x)
    mean = total / count.clamp(min=1)
    dev = x - mean[tasks]
    sq = torch.zeros_like(count).index_add_(0, tasks, dev**2)
    std = torch.where(count > 1, (sq / (count - 1).clamp(min=1)).sqrt(), torch.ones_like(sq))
    return (dev / (std[tasks] + eps)).to(advantages.dtype)


@torch.no_grad()
def approx_kl(logp: torch.Tensor, behaviour_logp: torch.Tensor) -> torch.Tensor:
    """Mean of ``(ρ − 1) − log ρ`` (Schulman's low-variance, never negative estimator of
    KL(μ ‖ π) from samples of μ), as SB3 and CleanRL log it."""
    log_ratio = logp - behaviour_logp
    return (torch.expm1(log_ratio) - log_ratio).mean()


@torch.no_grad()
def clip_fraction(logp: torch.Tensor, behaviour_logp: torch.Tensor, clip: float) -> torch.Tensor:
    """The fraction of samples whose ratio lies outside ``[1 − ε, 1 + ε]``."""
    ratio = torch.exp(logp - behaviour_logp)
    return ((ratio - 1.0).abs() > clip).float().mean()
