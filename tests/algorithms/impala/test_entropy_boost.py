"""How each task's entropy bonus is weighted
(:class:`mtrl.algorithms.impala.entropy_boost.BonusWeights`)."""

from __future__ import annotations

from mtrl.algorithms.impala.entropy_boost import BonusWeights

KINDS = (False, True, False)  # discrete, Gaussian, discrete


def test_discrete_bonus_in_units_of_entropy_coef_and_a_gaussians_off_by_default() -> None:
    w = BonusWeights.of(0.01, 0.0, KINDS)
    assert (w.unit, w.plain, w.boost_on) == (0.01, (1.0, 0.0, 1.0), 1.0)


def test_a_gaussians_own_coefficient_is_expressed_in_the_unit() -> None:
    w = BonusWeights.of(0.01, 0.005, KINDS)
    assert w.unit * w.plain[1] == 0.005 and w.plain[0] == w.plain[2] == 1.0


def test_without_entropy_coef_the_discrete_bonus_and_the_boosts_extra_are_off() -> None:
    """The floor's and ceiling's extra bonus is in units of entropy_coef: none when it is 0,
    while a Gaussian's own coefficient still counts in full."""
    w = BonusWeights.of(0.0, 0.02, KINDS)
    assert (w.unit, w.plain, w.boost_on) == (1.0, (0.0, 0.02, 0.0), 0.0)
