"""Each task's share of the shared torso's gradient (``learner/<task>/torso_grad_share``), one
of IMPALA's diagnostics: how much of what the torso learns each task's loss drives.

Measured every ``learner.diagnostics_every`` updates. Where the tasks' gradients are combined
the rows are at hand (:class:`mtrl.learner.task_gradients.GradientCombiner`), so it is free;
otherwise it costs one extra backward per task, and only a single process measures it (where
the torso is whole).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from mtrl.algorithms.impala.diagnostics import grad_shares

__all__ = ["TorsoShares"]


class TorsoShares:
    """When to measure the torso-gradient shares, and how (module docstring)."""

    def __init__(self, model: nn.Module, every: int, num_tasks: int) -> None:
        """``every``: ``learner.diagnostics_every`` (0: never)."""
        self.every, self.num_tasks = every, num_tasks
        self.torso = [q for q in model.torso.parameters() if q.requires_grad]

    def _due(self, version: int) -> bool:
        return self.every > 0 and version % self.every == 0

    def measured_apart(self, version: int, distributed: bool) -> bool:
        """Whether this update measures the shares by a backward per task (single-process
        learners only, where the torso is whole; not for a model without torso parameters,
        ``torso: []``)."""
        return self._due(version) and not distributed and bool(self.torso)

    def measure(self, task_losses: Mapping[int, torch.Tensor]) -> list[float]:
        """Each task's share of the torso gradient (0 for absent tasks); the losses' graph is
        kept for the update's own backward."""
        tasks = sorted(task_losses)
        got = grad_shares([task_losses[k] for k in tasks], self.torso)
        out = [0.0] * self.num_tasks
        for k, share in zip(tasks, got, strict=True):
            out[k] = share
        return out

    def from_rows(self, grads: torch.Tensor, version: int) -> list[float] | None:
        """The shares from the tasks' gradients of the shared parameters (``[K, P]``, every
        replica's summed) when due; None otherwise."""
        if not self._due(version):
            return None
        norms = grads.double().norm(dim=1)
        total = float(norms.sum())
        return [float(n) / total if total > 0 else 0.0 for n in norms]
