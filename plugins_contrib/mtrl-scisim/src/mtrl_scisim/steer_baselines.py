"""The outbreak study (:mod:`mtrl_scisim.steer`) run by classic designs instead of an agent.

Each method proposes the parameters of the next ``members`` simulations in the unit square;
the study runs them through the same env, so every method pays the same simulations, meets
the same hidden study (same seed) and is judged by the same figure (the misclassified
fraction after each batch):

* ``random``: uniform draws.
* ``lhs``: a Latin hypercube of the whole budget (``scipy.stats.qmc``), drawn up front and run
  batch by batch.
* ``tpe``: Optuna's Tree-structured Parzen Estimator, ``members`` asks per batch, minimising
  how far a run's final size lands from the major-outbreak threshold (in log ratio), so its
  runs gather where outcomes are borderline. (TPE searches for an optimum, not a boundary:
  this is the use a practitioner with a black-box optimiser would make of it.)
* ``uncertainty``: uncertainty sampling with a coverage term
  (:mod:`mtrl_scisim.steer_acquisition`, weight ``UNCERTAINTY_WEIGHT``, greedy): the next
  members go to the distinct cells of the observation grid where the estimate is least sure
  and data are fewest, a point drawn inside each. The classic active-learning answer to this
  study; the weight was picked among 0, 0.25, 0.5 on seeds 0–29, which a benchmark keeps apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mtrl_scisim.steer import OBS_GRID, OutbreakBoundaryBatchEnv
from mtrl_scisim.steer_acquisition import acquire

METHODS = ("random", "lhs", "tpe", "uncertainty")

#: The coverage weight of the ``uncertainty`` baseline.
UNCERTAINTY_WEIGHT = 0.25

Proposer = Callable[[np.ndarray | None, np.ndarray], np.ndarray]
"""``propose(final sizes of the last batch or None, the study's observation)`` → the next
batch's points ``(members, 2)`` in the unit square."""


def _random(env: OutbreakBoundaryBatchEnv, seed: int) -> Proposer:
    rng = np.random.default_rng(seed)
    return lambda _final, _obs: rng.random((env.members, 2))


def _lhs(env: OutbreakBoundaryBatchEnv, seed: int) -> Proposer:
    from scipy.stats import qmc

    design = qmc.LatinHypercube(d=2, seed=seed).random(env.budget)
    batches = iter(design.reshape(env.steps_per_study, env.members, 2))
    return lambda _final, _obs: next(batches)


def _tpe(env: OutbreakBoundaryBatchEnv, seed: int) -> Proposer:
    try:
        import optuna
    except ImportError:
        raise RuntimeError("the tpe baseline needs Optuna: pip install optuna") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)
    study = optuna.create_study(sampler=sampler, direction="minimize")
    threshold = env.study.major_fraction
    pending: list[Any] = []

    def propose(final: np.ndarray | None, _obs: np.ndarray) -> np.ndarray:
        if final is not None:
            for trial, size in zip(pending, final, strict=True):
                study.tell(trial, abs(float(np.log((size + 1e-4) / threshold))))
        pending.clear()
        pending.extend(study.ask() for _ in range(env.members))
        return np.array(
            [[t.suggest_float("u1", 0, 1), t.suggest_float("u2", 0, 1)] for t in pending]
        )

    return propose


def _uncertainty(env: OutbreakBoundaryBatchEnv, seed: int) -> Proposer:
    rng = np.random.default_rng(seed)
    k = OBS_GRID * OBS_GRID

    def propose(_final: np.ndarray | None, obs: np.ndarray) -> np.ndarray:
        cells = acquire(obs[:k], obs[k : 2 * k], UNCERTAINTY_WEIGHT, 0.0, env.members, rng)
        corner = np.stack([cells // OBS_GRID, cells % OBS_GRID], axis=-1) / OBS_GRID
        return corner + rng.random((env.members, 2)) / OBS_GRID

    return propose


def run_study(method: str, seed: int, **env_kwargs: Any) -> np.ndarray:
    """Run one study with ``method`` (seed ``seed`` for both the hidden study and the
    method); returns the misclassified fraction before any run and after each batch."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    env = OutbreakBoundaryBatchEnv(1, seed, **env_kwargs)
    obs = env.reset()
    make = {"random": _random, "lhs": _lhs, "tpe": _tpe, "uncertainty": _uncertainty}[method]
    propose = make(env, seed)
    errors = [float(env.error[0])]
    final = None
    for _ in range(env.steps_per_study):
        u = propose(final, obs[0])
        obs = env.step(u.reshape(1, -1)).obs
        final = env.last_final[0]
        errors.append(float(env.last_error[0]))
    return np.array(errors)
