"""Choosing the next members of an outbreak study from what it knows: an acquisition rule.

The study's state on the observation grid is, per cell, the estimated outbreak probability
``p`` and the amount of data nearby ``d`` (``mass / (mass + 1)`` in ``[0, 1)``). Uncertainty
sampling, the classic active-learning rule for finding a boundary (Lewis & Gale 1994), runs
the next simulations where the estimate is least sure, ``1 − |2p − 1|``; a coverage term
``− weight · d`` keeps it from piling runs where data already are. :func:`acquire` draws
``k`` distinct cells by that score: greedily at temperature 0, with Gumbel noise of scale
``temperature`` otherwise (a sample without replacement from ``softmax(score / temperature)``,
Kool et al. 2019), so large temperatures approach uniform draws.

Two users: the env's ``action: acquisition`` (the agent sets ``weight`` and ``temperature``
each step: a strategy rather than coordinates, whatever the parameter space's dimension) and
the ``uncertainty`` baseline (fixed, greedy).
"""

from __future__ import annotations

import numpy as np

#: Range of the coverage weight and of the temperature the agent's action in [0, 1] maps to
#: (the temperature on a log scale).
WEIGHT_MAX = 2.0
TEMPERATURE_RANGE = (0.01, 1.0)


def acquisition_score(estimate: np.ndarray, density: np.ndarray, weight: float) -> np.ndarray:
    """``1 − |2p − 1| − weight · d`` per cell."""
    return 1.0 - np.abs(2.0 * estimate - 1.0) - weight * density


def acquire(
    estimate: np.ndarray,
    density: np.ndarray,
    weight: float,
    temperature: float,
    k: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``k`` distinct cells (indices into the flat grid) by :func:`acquisition_score`, with
    Gumbel noise of scale ``temperature`` (0: greedy; ties broken at random)."""
    score = acquisition_score(estimate, density, weight)
    noise = rng.gumbel(size=score.shape) if temperature > 0 else 1e-9 * rng.random(score.shape)
    return np.argsort(-(score + temperature * noise))[:k]


def strategy(action: np.ndarray) -> tuple[float, float]:
    """``(weight, temperature)`` of an action in ``[0, 1]²`` (clipped)."""
    a = np.clip(np.asarray(action, float), 0.0, 1.0)
    lo, hi = np.log10(TEMPERATURE_RANGE)
    return WEIGHT_MAX * float(a[0]), float(10 ** (lo + (hi - lo) * a[1]))
