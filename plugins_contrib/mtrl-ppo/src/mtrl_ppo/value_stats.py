"""Each task's PopArt statistics for PPO: the value targets normalised per task, the value
head rescaled so its unnormalised outputs are preserved (Hessel et al. 2019), from mtrl's
public :mod:`mtrl.learner.popart` functions.

Why per task: a multi-task agent's returns differ by orders of magnitude between tasks
(CartPole's ~500 against Pendulum's ~−1,000), and one value loss in raw units would be
dominated by the task with the largest returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from mtrl.config.learner import PopArtConfig
from mtrl.learner import popart
from mtrl.learner.model import MultiTaskModel

__all__ = ["TaskValueStats"]


class TaskValueStats:
    """μ and ν of each task's value targets (float64), and whether a task has been seen yet;
    μ = 0, σ = 1 throughout when PopArt is off."""

    def __init__(self, num_tasks: int, cfg: PopArtConfig, device: torch.device) -> None:
        self.cfg = cfg
        self.mu = torch.zeros(num_tasks, dtype=torch.float64, device=device)
        self.nu = torch.ones(num_tasks, dtype=torch.float64, device=device)
        self.seen = torch.zeros(num_tasks, dtype=torch.bool, device=device)

    @property
    def sigma(self) -> torch.Tensor:
        """σ per task (float64 ``[K]``), kept within the config's bounds."""
        return popart.sigma(self.mu, self.nu, self.cfg.sigma_min, self.cfg.sigma_max)

    def stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(μ, σ) as float32 ``[K]``: unnormalised value = σ · head output + μ."""
        if not self.cfg.enabled:
            return torch.zeros_like(self.mu).float(), torch.ones_like(self.mu).float()
        return self.mu.float(), self.sigma.float()

    @torch.no_grad()
    def update(
        self,
        model: MultiTaskModel,
        tasks: Sequence[int],
        returns: Sequence[torch.Tensor],
        valid: Sequence[torch.Tensor],
    ) -> None:
        """Move the statistics toward this batch's value targets (``returns[i]`` of task
        ``tasks[i]``, unnormalised, ``valid[i]`` masking reset steps) and rescale ``model``'s
        value head so that every unnormalised output stays as it was. No-op without PopArt."""
        if not self.cfg.enabled or not returns:
            return
        k = self.mu.shape[0]
        sums = torch.zeros(3, k, dtype=torch.float64, device=self.mu.device)
        for task, ret, mask in zip(tasks, returns, valid, strict=True):
            ids = torch.full_like(ret, task, dtype=torch.long)
            m = popart.task_moments(ret.double(), ids, k, mask=mask)
            sums += popart.moments_to_sums(m).to(sums.device)
        moments = popart.moments_from_sums(sums)
        c = self.cfg
        step = popart.popart_step(
            self.mu,
            self.nu,
            model.value_weight.data,
            model.value_bias.data,
            moments,
            c.beta,
            c.sigma_min,
            c.sigma_max,
            first=~self.seen if c.init_from_first_batch else None,
        )
        self.seen |= moments.count.to(self.seen.device) > 0
        self.mu.copy_(step.mu)
        self.nu.copy_(step.nu)
        model.value_weight.copy_(step.weight)
        model.value_bias.copy_(step.bias)

    def state_dict(self) -> dict[str, Any]:
        return {"mu": self.mu, "nu": self.nu, "popart_seen": self.seen}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mu.copy_(state["mu"])
        self.nu.copy_(state["nu"])
        self.seen.copy_(state["popart_seen"])
