"""A floor under each discrete task's policy entropy: the entropy bonus grows while it is below.

Why: an actor-critic policy can turn nearly deterministic early, at a poor policy, and stay
there. Adam moves each weight of the policy head by about the learning rate per update
whatever the gradient's size, so while the early advantages point one way the logits grow by
~lr · Σ|h| per update (h: the torso's features); once one action dominates, the entropy
bonus's gradient vanishes with the other actions' probabilities (∂H/∂logit ∝ p log p), the
value function fits the one behaviour exactly and the advantages carry no signal: nothing
pulls the policy back. Measured in the quickstart: breakout's entropy fell from 1.1 to 0.1
(of log 3 = 1.1) within 66k of its steps in ~1 run of 10, its return stuck at ~1.5 for the
rest of the run (docs/BENCHMARKS.md, "Learning that holds").

Rule (dual ascent on the constraint H ≥ floor · H_max, in log space): each update,
``log boost += rate · (floor − H / H_max)``, clipped to ``[0, log max_boost]``; the task's
entropy bonus is ``entropy_coef · boost``. Above the floor the boost decays back to 1, so a
healthy policy sees the plain bonus. ``H_max`` is the entropy of the uniform policy (log of
the action count, summed over MultiDiscrete dims). Continuous (Gaussian) policies have no
maximum — a precise policy has negative entropy — and keep the plain bonus.

Pure functions of tensors: no state, no I/O.
"""

from __future__ import annotations

import math

import torch

__all__ = ["MAX_BOOST", "RATE", "boost_step"]

RATE = 1.0
"""Change of log boost per update per unit of normalised shortfall: at 15 % of ``H_max``
below the floor the bonus grows 16 % per update (10x in ~15 updates)."""

MAX_BOOST = 100.0
"""Cap of the boost: the bonus at most 100x ``entropy_coef`` (1.0 at the default 0.01)."""


def boost_step(
    boost: torch.Tensor,
    entropy: torch.Tensor,
    max_entropy: torch.Tensor,
    floor: float,
    seen: torch.Tensor,
    rate: float = RATE,
    max_boost: float = MAX_BOOST,
) -> torch.Tensor:
    """The next entropy-bonus multipliers ``[K]`` (each in ``[1, max_boost]``).

    ``entropy``: each task's mean policy entropy in this update; ``max_entropy``: its
    uniform policy's (NaN: no maximum, boost stays 1); ``seen``: tasks in this update (the
    others keep theirs). ``floor`` is a fraction of ``max_entropy``; 0 turns the rule off.
    """
    if boost.ndim != 1 or entropy.shape != boost.shape or max_entropy.shape != boost.shape:
        raise ValueError(
            "boost_step: boost, entropy and max_entropy must be vectors of one length, got "
            f"{tuple(boost.shape)}, {tuple(entropy.shape)}, {tuple(max_entropy.shape)}"
        )
    if not 0.0 <= floor < 1.0:
        raise ValueError(f"boost_step: floor must be in [0, 1), got {floor}")
    if rate < 0 or max_boost < 1:
        raise ValueError(f"boost_step: need rate ≥ 0 and max_boost ≥ 1, got {rate}, {max_boost}")
    h_max = max_entropy.to(boost)
    bounded = torch.isfinite(h_max) & (h_max > 0)
    shortfall = floor - entropy.to(boost) / torch.where(bounded, h_max, torch.ones_like(h_max))
    log_boost = (boost.log() + rate * shortfall).clamp(0.0, math.log(max_boost))
    step = torch.where(bounded, log_boost.exp(), torch.ones_like(boost))
    if floor == 0.0:
        step = torch.ones_like(boost)
    return torch.where(seen.to(boost.device), step, boost)
