"""Each task's entropy-bonus multiplier, kept between updates and moved after each one by the
rules of :mod:`mtrl.learner.entropy_floor` (a floor under a discrete task's entropy, a ceiling
on a squashed Gaussian task's saturated fraction).

Lives on the host, where the diagnostics it follows are: one small copy to the device per
update, no sync back.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mtrl.learner import entropy_floor

__all__ = ["EntropyBoost"]


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
