"""Schedules of the step size and the entropy bonus over a run (mtrl.learner.schedule)."""

from __future__ import annotations

import pytest

from mtrl.config import LearnerConfig
from mtrl.learner.schedule import entropy_coef, learning_rate


def test_linear_schedule_anneals_to_the_final_fraction() -> None:
    cfg = LearnerConfig(learning_rate=1e-3, lr_schedule="linear", lr_final_fraction=0.1)
    assert learning_rate(cfg, 0.0) == pytest.approx(1e-3)
    assert learning_rate(cfg, 0.5) == pytest.approx(5.5e-4)
    assert learning_rate(cfg, 2.0) == pytest.approx(1e-4)
    constant = LearnerConfig(learning_rate=1e-3, lr_schedule="constant")
    assert learning_rate(constant, 0.9) == pytest.approx(1e-3)


def test_entropy_bonus_is_constant_by_default_and_can_anneal() -> None:
    assert entropy_coef(LearnerConfig(entropy_coef=0.02), 0.7) == pytest.approx(0.02)
    cfg = LearnerConfig(entropy_coef=0.02, entropy_schedule="linear", entropy_final_fraction=0.5)
    assert entropy_coef(cfg, 0.0) == pytest.approx(0.02)
    assert entropy_coef(cfg, 0.5) == pytest.approx(0.015)
    assert entropy_coef(cfg, 3.0) == pytest.approx(0.01)
