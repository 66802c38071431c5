"""When a task's entropy bonus grows: below an entropy floor (discrete policies), or above a
saturation ceiling (squashed Gaussian policies).

Why, discrete: an actor-critic policy can turn nearly deterministic early, at a poor policy,
and stay there. Adam moves each weight of the policy head by about the learning rate per
update whatever the gradient's size, so while the early advantages point one way the logits
grow by ~lr · Σ|h| per update (h: the torso's features); once one action dominates, the
entropy bonus's gradient vanishes with the other actions' probabilities (∂H/∂logit ∝ p log p),
the value function fits the one behaviour exactly and the advantages carry no signal: nothing
pulls the policy back. Measured in the quickstart: breakout's entropy fell from 1.1 to 0.1
(of log 3 = 1.1) within 66k of its steps in ~1 run of 10, its return stuck at ~1.5 for the
rest of the run (docs/BENCHMARKS.md, "Learning that holds").

Why, squashed Gaussian: the env receives ``tanh(u)`` scaled to its bounds, and a fast-moving
policy (a high learning rate, stale unrolls) can throw the Gaussian's mean out where tanh is
flat: every sample is then the same env action, the advantages are noise, and Adam's
unit-size steps random-walk the mean instead of bringing it back. The squashed action's
entropy (``model.squashed_entropy``) pulls the mean back, but as a plain bonus at
``entropy_coef`` its pull (~2 · coef per sample) is far below the policy gradient's noise
(and a Gaussian's plain bonus is off by default, ``gaussian_entropy_coef``: it pulls the
mean toward the middle in every state, also where full force is needed). Measured in the
quickstart at lr 1.5e-3 with process actors: InvertedPendulum's mean saturated on 72–97 % of
its states, returns at 2–5 for 150k+ of its steps, in 7 runs of 10.

Rule (dual ascent on the constraint, in log space): each update,
``log boost += rate · violation``, clipped to ``[0, log max_boost]``; the task's entropy
bonus gains ``entropy_coef · (boost − 1)`` over its plain one. The violation is
``floor − H / H_max`` for a discrete task (``H_max``: the uniform policy's entropy, log of the
action count summed over MultiDiscrete dims) and ``saturated − ceiling`` for a squashed
Gaussian task (``saturated``: the fraction of its action dims with ``|mean| > 2``,
mtrl.algorithms.impala.diagnostics); other tasks keep the plain bonus. Once the constraint holds the
boost decays back to 1, so a healthy policy sees the plain bonus alone. A precise
continuous policy has negative entropy, so Gaussians get no floor.

Pure functions of tensors: no state, no I/O.
"""

from __future__ import annotations

import math

import torch

__all__ = ["MAX_BOOST", "RATE", "boost_step", "entropy_shortfall", "saturation_excess"]

RATE = 1.0
"""Change of log boost per update per unit of violation: at 15 % of ``H_max`` below the
floor the bonus grows 16 % per update (10x in ~15 updates)."""

MAX_BOOST = 100.0
"""Cap of the boost: the bonus at most 100x ``entropy_coef`` (1.0 at the default 0.01)."""


def _vectors(name: str, *xs: torch.Tensor) -> None:
    if any(x.ndim != 1 or x.shape != xs[0].shape for x in xs):
        raise ValueError(
            f"{name}: expected vectors of one length, got {[tuple(x.shape) for x in xs]}"
        )


def entropy_shortfall(
    entropy: torch.Tensor, max_entropy: torch.Tensor, floor: float
) -> torch.Tensor:
    """``floor − H / H_max`` per task (float64); NaN where the task's policy has no maximum
    entropy (``max_entropy`` NaN: a Gaussian) or ``floor`` is 0 (the floor is off)."""
    _vectors("entropy_shortfall: entropy and max_entropy", entropy, max_entropy)
    if not 0.0 <= floor < 1.0:
        raise ValueError(f"entropy_shortfall: floor must be in [0, 1), got {floor}")
    h_max = max_entropy.to(torch.float64)
    bounded = torch.isfinite(h_max) & (h_max > 0) & (floor > 0)
    ratio = entropy.to(h_max) / torch.where(bounded, h_max, torch.ones_like(h_max))
    return torch.where(bounded, floor - ratio, torch.full_like(h_max, math.nan))


def saturation_excess(
    saturated: torch.Tensor, squashed: torch.Tensor, ceiling: float
) -> torch.Tensor:
    """``saturated − ceiling`` per task (float64) for squashed Gaussian tasks (``squashed``
    true); NaN for the others, and for all when ``ceiling`` is 1 (the ceiling is off)."""
    _vectors("saturation_excess: saturated and squashed", saturated, squashed)
    if not 0.0 < ceiling <= 1.0:
        raise ValueError(f"saturation_excess: ceiling must be in (0, 1], got {ceiling}")
    sat = saturated.to(torch.float64)
    on = squashed.to(torch.bool) & (ceiling < 1.0)
    return torch.where(on, sat - ceiling, torch.full_like(sat, math.nan))


def boost_step(
    boost: torch.Tensor,
    violation: torch.Tensor,
    seen: torch.Tensor,
    rate: float = RATE,
    max_boost: float = MAX_BOOST,
) -> torch.Tensor:
    """The next entropy-bonus multipliers ``[K]`` (each in ``[1, max_boost]``).

    ``violation``: each task's :func:`entropy_shortfall` or :func:`saturation_excess` in this
    update (NaN: no constraint, the boost is 1); ``seen``: tasks in this update (the others
    keep theirs).
    """
    _vectors("boost_step: boost, violation and seen", boost, violation, seen)
    if rate < 0 or max_boost < 1:
        raise ValueError(f"boost_step: need rate ≥ 0 and max_boost ≥ 1, got {rate}, {max_boost}")
    v = violation.to(boost)
    ruled = torch.isfinite(v)
    log_boost = (boost.log() + rate * torch.where(ruled, v, 0.0)).clamp(0.0, math.log(max_boost))
    step = torch.where(ruled, log_boost.exp(), torch.ones_like(boost))
    return torch.where(seen.to(boost.device), step, boost)
