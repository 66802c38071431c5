"""FAMO on SAC's critic losses (``learner.multitask.loss_weighting: famo``; the math is
:mod:`mtrl.learner.famo`).

What FAMO weighs, as its authors' Meta-World MT10 SAC code does (github.com/Cranial-XIX/FAMO,
``mtrl_files/famo.py``, built on facebookresearch/mtrl): each task's **critic loss**, the mean
over its rows of ``(Q₁ − y)² + (Q₂ − y)²`` — a squared error, positive, falling as the task's
critics learn. The policy loss (``α log π − Q``, of either sign, its size the critics' scale)
and the temperature loss (``log α · (H − H̄)``, of either sign) are not progress measures; they
keep their plain means, as in that code.

The loss "after" the step is the critics' loss on the **same batch** against the same targets,
once the critic optimiser has stepped, as that code measures it: one more forward pass of the
twin critics per gradient step (no graph, no backward). The next step's loss would cost
nothing, but on a fresh batch its change would mix the step's effect with the sampling noise
between two batches.

With data-parallel replicas, each task's loss sums and row counts are summed over the replicas
before and after the step (as the temperatures' entropy sums are), so every replica takes the
same multipliers and the same logit step.
"""

from __future__ import annotations

from typing import Any

import torch

from mtrl.config.multitask import MultitaskConfig
from mtrl.learner import famo
from mtrl.learner.optim import adam_step

__all__ = ["CriticFamo"]


class CriticFamo:
    """FAMO's state for one SAC learner's critics: the task logits and their Adam (with
    FAMO's weight decay), and the step's losses before the critics' step."""

    def __init__(self, learner: Any, cfg: MultitaskConfig, adam: dict[str, bool]) -> None:
        """``learner``: the :class:`~mtrl.algorithms.sac.learner.SacLearner` whose
        ``_task_sums`` sums per-task values over its replicas and whose ``world`` counts them;
        ``adam``: the flags of its other optimisers (fused, capturable)."""
        self.learner = learner
        self.epsilon = cfg.famo_epsilon
        k = len(learner.task_names)
        self.logits = torch.zeros(k, device=learner.device, requires_grad=True)
        self.opt = torch.optim.Adam(
            [self.logits], lr=cfg.famo_lr, weight_decay=cfg.famo_weight_decay, **adam
        )
        self._count = torch.zeros(k, device=learner.device)
        self._rows = torch.ones(k, device=learner.device)
        self._present = torch.zeros(k, dtype=torch.bool, device=learner.device)
        self._before = torch.zeros(k, device=learner.device)

    @property
    def weights(self) -> torch.Tensor:
        """Each task's FAMO weight ``[K]`` (no gradient; they sum to 1)."""
        return famo.task_weights(self.logits.detach())

    def row_scales(self, count: torch.Tensor, sums: torch.Tensor) -> torch.Tensor:
        """Per task ``[K]``, what multiplies this replica's summed critic loss of the task's
        rows in the loss it steps on: ``m_k · replicas / rows_k`` (``count``: this replica's
        rows of each task, ``sums``: their summed loss, not differentiated). Averaged over the
        replicas, the gradient is ``Σ_k m_k ∇ℓ_k`` of the whole batch's per-task means."""
        self._count = count
        rows, total = self.learner._task_sums(count, sums.detach())
        self._present = rows > 0
        self._rows = rows.clamp(min=1)
        self._before = total / self._rows
        scales = famo.loss_scales(self._before, self.logits, self._present, self.epsilon)
        return scales * (self.learner.world / self._rows)

    def update(self, sums: torch.Tensor) -> None:
        """Step the logits from the critics' summed loss per task ``[K]`` on this replica's
        rows after the critics' step (the rows :meth:`row_scales` was given)."""
        _, total = self.learner._task_sums(self._count, sums.detach())
        after = total / self._rows
        self.logits.grad = famo.logit_gradient(
            self.logits, self._before, after, self._present, self.epsilon
        )
        adam_step(self.opt)

    def state_dict(self) -> dict[str, Any]:
        """The logits and their optimiser's state, as plain data."""
        return {"logits": self.logits.detach().clone(), "optimizer": self.opt.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`."""
        with torch.no_grad():
            self.logits.copy_(state["logits"])
        self.opt.load_state_dict(state["optimizer"])
