"""SAC's losses as pure functions of tensors (no modules, no state).

Continuous actions (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications"):
the policy is a Gaussian over the raw action ``u`` squashed into ``a = tanh(u)`` in
``[-1, 1]`` (the env receives ``a`` rescaled to its bounds), so the log-density of ``a`` is
``log N(u) − Σ log(1 − tanh² u)`` (:func:`squashed_log_prob`; given the bounds' half-widths it
is that of the rescaled action). SAC's losses and its target entropy use the density of ``a``
in ``[-1, 1]``, so neither depends on the units of a task's action. Discrete actions
(Christodoulou 2019, "Soft Actor-Critic for Discrete Action Settings"): the critics give ``Q``
of every action and the expectations over the policy are computed exactly instead of sampled.

With ``α`` the temperature and ``Q̄`` the target critics:

* soft value of the next state — continuous: ``min(Q̄₁, Q̄₂)(s', a') − α log π(a'|s')`` with
  ``a' ~ π(s')``; discrete: ``Σ_a π(a|s') [min(Q̄₁, Q̄₂)(s', a) − α log π(a|s')]``;
* critic target ``y = r + γ (1 − terminated) V(s')`` (a truncated step bootstraps);
* critic loss ``(Q₁ − y)² + (Q₂ − y)²``, each sample times its importance weight;
* actor loss — continuous: ``α log π(a|s) − min(Q₁, Q₂)(s, a)`` with reparameterised
  ``a``; discrete: ``Σ_a π(a|s) [α log π(a|s) − min(Q₁, Q₂)(s, a)]``;
* temperature loss ``log α · (H − H̄)`` with the policy's entropy ``H`` held constant: ``α``
  falls while the entropy is above the target ``H̄`` and rises while below.

Per-sample functions return ``[n]``; the learner averages.
"""

from __future__ import annotations

import torch

from mtrl.learner.distributions import log_tanh_jacobian

__all__ = [
    "continuous_actor_loss",
    "continuous_next_value",
    "critic_loss",
    "discrete_actor_loss",
    "discrete_entropy",
    "discrete_next_value",
    "soft_target",
    "squashed_log_prob",
    "temperature_loss",
]


def _sum_event(x: torch.Tensor, batch_ndim: int) -> torch.Tensor:
    return x.sum(dim=tuple(range(batch_ndim, x.ndim))) if x.ndim > batch_ndim else x


def squashed_log_prob(
    raw_logp: torch.Tensor, u: torch.Tensor, log_half_width: torch.Tensor | None = None
) -> torch.Tensor:
    """Log-density ``[n]`` of ``tanh(u)`` from the raw Gaussian's ``raw_logp [n]`` at
    ``u [n, *act]`` (change of variables through the tanh); with ``log_half_width``
    (``log((high − low) / 2)`` per dim) that of the action rescaled to the bounds."""
    batch = raw_logp.ndim
    correction = log_tanh_jacobian(u)
    if log_half_width is not None:
        correction = correction + log_half_width.to(u.dtype)
    return raw_logp - _sum_event(correction, batch)


def soft_target(
    rewards: torch.Tensor, terminated: torch.Tensor, gamma: float, next_value: torch.Tensor
) -> torch.Tensor:
    """``y = r + γ (1 − terminated) V(s')``."""
    return rewards + gamma * (~terminated.bool()).to(rewards.dtype) * next_value


def continuous_next_value(
    q1: torch.Tensor, q2: torch.Tensor, logp: torch.Tensor, alpha: torch.Tensor
) -> torch.Tensor:
    """``min(Q̄₁, Q̄₂)(s', a') − α log π(a'|s')`` for a sampled ``a'`` (all ``[n]``)."""
    return torch.minimum(q1, q2) - alpha * logp


def discrete_next_value(
    q1: torch.Tensor, q2: torch.Tensor, log_probs: torch.Tensor, alpha: torch.Tensor
) -> torch.Tensor:
    """``Σ_a π(a|s') [min(Q̄₁, Q̄₂)(s', a) − α log π(a|s')]`` from ``[n, A]`` critics and
    log-probabilities; ``alpha`` is ``[n]``."""
    probs = log_probs.exp()
    inner = torch.minimum(q1, q2) - alpha.unsqueeze(-1) * log_probs
    return (probs * inner).sum(-1)


def critic_loss(
    q1: torch.Tensor, q2: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """``w · ((Q₁ − y)² + (Q₂ − y)²)`` per sample (``y`` is not differentiated)."""
    y = target.detach()
    loss = (q1 - y).square() + (q2 - y).square()
    return loss if weights is None else loss * weights


def continuous_actor_loss(
    logp: torch.Tensor, q1: torch.Tensor, q2: torch.Tensor, alpha: torch.Tensor
) -> torch.Tensor:
    """``α log π(a|s) − min(Q₁, Q₂)(s, a)`` per sample (``α`` not differentiated)."""
    return alpha.detach() * logp - torch.minimum(q1, q2)


def discrete_actor_loss(
    log_probs: torch.Tensor, q1: torch.Tensor, q2: torch.Tensor, alpha: torch.Tensor
) -> torch.Tensor:
    """``Σ_a π(a|s) [α log π(a|s) − min(Q₁, Q₂)(s, a)]`` per sample (``Q`` and ``α`` held
    constant: only the policy moves)."""
    probs = log_probs.exp()
    inner = alpha.detach().unsqueeze(-1) * log_probs - torch.minimum(q1, q2).detach()
    return (probs * inner).sum(-1)


def discrete_entropy(log_probs: torch.Tensor) -> torch.Tensor:
    """``−Σ_a π(a) log π(a)`` per sample from ``[n, A]`` log-probabilities."""
    return -(log_probs.exp() * log_probs).sum(-1)


def temperature_loss(
    log_alpha: torch.Tensor, entropy: torch.Tensor, target_entropy: torch.Tensor | float
) -> torch.Tensor:
    """``log α · (H − H̄)`` (``H`` held constant); its gradient in ``log α`` is ``H − H̄``."""
    return log_alpha * (entropy.detach() - target_entropy)
