"""Learning-rate schedules: the optimiser's step size as a pure function of run progress."""

from __future__ import annotations

from mtrl.config import LearnerConfig

__all__ = ["learning_rate"]


def learning_rate(cfg: LearnerConfig, progress: float) -> float:
    """Step size at ``progress`` = env steps so far / total env steps (clipped to [0, 1]).

    ``constant``: ``cfg.learning_rate``. ``linear`` (IMPALA, Espeholt et al. 2018): falls
    linearly from ``cfg.learning_rate`` to ``cfg.learning_rate * cfg.lr_final_fraction``.
    """
    if cfg.lr_schedule == "constant":
        return cfg.learning_rate
    p = min(max(float(progress), 0.0), 1.0)
    return cfg.learning_rate * (1.0 - p * (1.0 - cfg.lr_final_fraction))
