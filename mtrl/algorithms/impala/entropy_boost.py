"""Each task's entropy-bonus multiplier, kept between updates and moved after each one by the
rules of :mod:`mtrl.algorithms.impala.entropy_floor` (a floor under a discrete task's entropy,
a ceiling on a squashed Gaussian task's saturated fraction).

Lives on the host, where the diagnostics it follows are: one small copy to the device per
update, no sync back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mtrl.algorithms.impala import entropy_floor

__all__ = ["BonusWeights", "EntropyBoost"]


@dataclass(frozen=True)
class BonusWeights:
    """How each task's entropy bonus is weighted in the loss:
    ``unit · entropy · (plain · σ / scale + boost_on · (boost − 1))``.

    ``unit`` is ``entropy_coef`` (1 when that is 0, and the floor's and ceiling's extra bonus
    is then off: ``boost_on`` 0); ``plain`` is each task's plain weight in that unit — 1 for
    a discrete policy, ``gaussian_entropy_coef / unit`` for a Gaussian (0 by default: its
    bonus would pull every state's action toward the middle of the range).
    """

    unit: float
    plain: tuple[float, ...]
    boost_on: float

    @classmethod
    def of(
        cls, entropy_coef: float, gaussian_entropy_coef: float, gaussian: Sequence[bool]
    ) -> BonusWeights:
        """From the learner config's two coefficients and each task's policy kind."""
        on = 1.0 if entropy_coef > 0 else 0.0
        unit = entropy_coef if entropy_coef > 0 else 1.0
        return cls(unit, tuple(gaussian_entropy_coef / unit if g else on for g in gaussian), on)


class EntropyBoost:
    """Multipliers ``values [K]`` (float64, each in ``[1, MAX_BOOST]``) of the tasks' bonuses."""

    def __init__(
        self, max_entropy: Sequence[float], squashed: Sequence[bool], floor: float, ceiling: float
    ) -> None:
        """``max_entropy``: each task's uniform-policy entropy (NaN for a Gaussian);
        ``squashed``: whether it is a squashed Gaussian; ``floor``/``ceiling``: the config's
        ``entropy_floor`` and ``saturation_ceiling`` (0 and 1 turn them off)."""
        self.values = torch.ones(len(max_entropy), dtype=torch.float64)
        self._max_entropy = torch.tensor(max_entropy, dtype=torch.float64)
        self._squashed = torch.tensor(squashed, dtype=torch.bool)
        self.floor, self.ceiling = floor, ceiling
        self.active = floor > 0 or ceiling < 1
        """False with floor and ceiling off: every multiplier is then 1."""
        ruled = torch.isfinite(self._max_entropy) | self._squashed
        self.ruled = tuple(bool(r) for r in ruled) if self.active else (False,) * len(ruled)
        """Per task: whether a rule moves its multiplier (the ones worth logging)."""

    def multipliers(self) -> torch.Tensor:
        """The multipliers the loss uses: all 1 when inactive (even if a checkpoint brought
        others)."""
        return self.values if self.active else torch.ones_like(self.values)

    def step(self, entropy: torch.Tensor, saturated: torch.Tensor, seen: torch.Tensor) -> None:
        """Move the multipliers by this update's mean ``entropy`` and ``saturated`` fraction
        per task; tasks not ``seen`` in it keep theirs."""
        if not self.active:
            return
        shortfall = entropy_floor.entropy_shortfall(entropy, self._max_entropy, self.floor)
        excess = entropy_floor.saturation_excess(saturated, self._squashed, self.ceiling)
        violation = torch.where(torch.isfinite(shortfall), shortfall, excess)
        self.values.copy_(entropy_floor.boost_step(self.values, violation, seen))
