"""The step size over a run (mtrl.learner.schedule)."""

from __future__ import annotations

import pytest

from mtrl.config import LearnerConfig
from mtrl.learner.schedule import learning_rate


def test_linear_schedule_anneals_to_the_final_fraction() -> None:
    cfg = LearnerConfig(learning_rate=1e-3, lr_schedule="linear", lr_final_fraction=0.1)
    assert learning_rate(cfg, 0.0) == pytest.approx(1e-3)
    assert learning_rate(cfg, 0.5) == pytest.approx(5.5e-4)
    assert learning_rate(cfg, 2.0) == pytest.approx(1e-4)
    constant = LearnerConfig(learning_rate=1e-3, lr_schedule="constant")
    assert learning_rate(constant, 0.9) == pytest.approx(1e-3)
