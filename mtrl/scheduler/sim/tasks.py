"""The simulated tasks of :mod:`mtrl.scheduler.sim.simulator`: what one task costs, how it fails and
learns (:class:`TaskModel`), and a generator of an Atari-57-like suite of them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TaskModel:
    """One simulated task: its step-time distribution, failures and learning curve."""

    name: str
    weight: float = 1.0
    step_cost_s: float = 0.01
    """Median seconds of one copy's env step."""
    sigma: float = 0.25
    """Lognormal shape of per-copy step times (jitter)."""
    tail_prob: float = 0.0
    """Chance a copy's step is a straggler drawn from the Pareto tail instead."""
    tail_alpha: float = 1.5
    """Pareto index of stragglers (< 2: infinite variance)."""
    tail_scale: float = 10.0
    """Stragglers take at least ``tail_scale`` median steps."""
    failure_prob: float = 0.0
    """Chance an unroll crashes its actor."""
    learn_steps: float = 1e6
    """Env steps (consumed by the learner) to reach 63% of the reference score."""
    score_noise: float = 0.05
    """Standard deviation of an episode score around the learning curve."""
    target: float = 0.9
    """Normalised score at which the task counts as solved."""


def atari57_like(
    rng: np.random.Generator,
    n: int = 57,
    median_cost_s: float = 0.005,
    cost_sigma: float = 0.6,
    heavy_tail_fraction: float = 0.1,
    failure_prob: float = 0.01,
    median_learn_steps: float = 5e5,
) -> list[TaskModel]:
    """``n`` tasks whose step costs spread ~10x (lognormal across games), a fraction of them
    with straggler tails (stochastic simulators), and difficulty (env steps to learn) spread
    lognormally too, so some tasks are solved early and others lag."""
    costs = median_cost_s * np.exp(cost_sigma * rng.standard_normal(n))
    heavy = rng.random(n) < heavy_tail_fraction
    learn = median_learn_steps * np.exp(1.0 * rng.standard_normal(n))
    return [
        TaskModel(
            name=f"game{i:02d}",
            step_cost_s=float(costs[i]),
            sigma=float(rng.uniform(0.1, 0.4)),
            tail_prob=0.02 if heavy[i] else 0.0,
            failure_prob=failure_prob,
            learn_steps=float(learn[i]),
        )
        for i in range(n)
    ]
