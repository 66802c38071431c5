"""What SAC's critics output and how they learn (``learner.sac.critic``): one ``Q`` per action
and the squared error (``mse``, SAC's), or logits over a support whose expectation is ``Q`` and
the cross entropy to the two-hot target (``categorical``; the math is
:mod:`mtrl.algorithms.sac.categorical`). Both gradient steps ask this object, so the rest of the
step — soft targets from the smaller of the target critics' ``Q``, the policy through the
critics' ``Q``, FAMO's weights, priorities from the TD error of ``Q`` — is the same for either.
"""

from __future__ import annotations

from typing import Any

import torch

from mtrl.algorithms.sac import categorical, losses

__all__ = ["CriticOutput", "critic_bins", "critic_output"]


class CriticOutput:
    """The critics' outputs per action (``bins``: 1 for ``mse``) and the two maps of the step:
    outputs to ``Q`` (:meth:`value`) and the twin critics' outputs at the stored actions to their
    loss per row (:meth:`loss`)."""

    def __init__(self, values: torch.Tensor | None = None) -> None:
        """``values``: the categorical critic's support (None: ``mse``)."""
        self.values = values
        self.bins = 1 if values is None else int(values.shape[0])

    @property
    def categorical(self) -> bool:
        """Whether the critics output logits over a support."""
        return self.values is not None

    def value(self, out: torch.Tensor) -> torch.Tensor:
        """``Q`` of outputs ``out`` (``[*B]`` for ``mse``, logits ``[*B, bins]``)."""
        return out if self.values is None else categorical.expected(out, self.values)

    def loss(
        self,
        out1: torch.Tensor,
        out2: torch.Tensor,
        target: torch.Tensor,
        weights: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Both critics' loss per row ``[*B]`` towards the soft target ``y`` ``[*B]``, times the
        rows' importance ``weights``: ``(Q₁ − y)² + (Q₂ − y)²``, or the cross entropies of both
        critics' logits to ``y``'s two-hot projection."""
        if self.values is None:
            return losses.critic_loss(out1, out2, target, weights)
        projected = categorical.two_hot(target.detach(), self.values).to(out1.dtype)
        loss = categorical.cross_entropy(out1, projected) + categorical.cross_entropy(
            out2, projected
        )
        return loss if weights is None else loss * weights


def critic_output(sac: Any, device: torch.device) -> CriticOutput:
    """The critics' output for settings ``sac`` (:class:`~mtrl.algorithms.sac.settings.
    SacSettings`) on ``device``."""
    if sac.critic == "mse":
        return CriticOutput()
    return CriticOutput(categorical.support(sac.v_min, sac.v_max, sac.num_bins, device))


def critic_bins(sac: Any) -> int | None:
    """Outputs per action of the critics' heads for settings ``sac`` (None: one ``Q``)."""
    return sac.num_bins if sac.critic == "categorical" else None
