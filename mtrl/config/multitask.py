"""How the tasks' gradients on the shared parameters are combined, and how their losses are
weighted (``learner.multitask``).

By default an update's gradient is the sum of every task's (``sum``): the gradient of the mean
loss over the mixed batch. Where tasks pull the shared torso in opposite directions, the
multi-task literature changes how the per-task gradients of the *shared* parameters are
combined (the per-task encoders and heads get their own task's gradient as always):
``pcgrad`` (gradient surgery, Yu et al. 2020) and ``cagrad`` (conflict-averse gradient
descent, Liu et al. 2021). The math is :mod:`mtrl.learner.gradient_combination`.

``loss_weighting: famo`` instead changes the tasks' weights in the loss itself: FAMO (Liu et al.
2023) weighs them by how fast their losses fall (:mod:`mtrl.learner.famo`). It needs losses that
are positive and measure progress, which SAC's critic losses are and a policy-gradient loss is
not: SAC offers it; the IMPALA rules refuse it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, model_validator

from mtrl.config.base import ConfigModel


class MultitaskConfig(ConfigModel):
    """The combination of per-task gradients on the shared torso (and shared recurrent core),
    or the weighting of the tasks' losses."""

    gradients: Literal["sum", "pcgrad", "cagrad"] = "sum"
    """``sum``: the plain gradient of the batch's loss. ``pcgrad``: each task's gradient loses
    its component along any other task's gradient it conflicts with (negative dot product),
    the tasks taken in a random order, then the results are summed. ``cagrad``: the update
    that maximises the worst task's improvement within a ball of radius ``cagrad_c·|g0|``
    around the mean gradient ``g0``, scaled to the sum's size. Both need each task's gradient
    of the shared parameters: one extra backward pass per task in the update (learner only;
    not with ``learner.parallel.model_parallel: fsdp``, whose torso is split over ranks)."""
    cagrad_c: float = Field(default=0.4, ge=0)
    """CAGrad's ``c``: how far (relative to the mean gradient's norm) the update may leave the
    mean to help the worst-off task; 0 is the plain mean. The paper's Meta-World MT10 value
    is 0.4 (its multi-task supervised settings use 0.4–0.5)."""
    loss_weighting: Literal["none", "famo"] = "none"
    """``none``: every row of the batch counts alike in each loss. ``famo``: FAMO (Fast
    Adaptive Multitask Optimization, Liu et al. 2023) weighs each task's mean critic loss by a
    learned weight ``z = softmax(ξ)``, stepping along the gradient of ``Σ z_k log ℓ_k``
    (normalised), and after each step moves the logits ``ξ`` so that a task whose loss fell
    faster than the others' loses weight and one that fell slower gains it: the tasks' losses
    fall at balanced rates, at the cost of one more forward pass of the critics per gradient
    step. SAC only (its critic losses are squared errors: positive, and falling as a task is
    learned; the policy and temperature losses keep their plain means, as in FAMO's MT10 SAC);
    refused by rules whose losses are policy gradients (IMPALA), and together with
    ``gradients: pcgrad | cagrad`` (FAMO is an alternative to combining the tasks' gradients,
    compared with them in its paper, not composed)."""
    famo_lr: PositiveFloat = 0.025
    """Adam step size of FAMO's task logits (the paper's ``β``; the authors' Meta-World MT10
    SAC script uses 0.025)."""
    famo_weight_decay: NonNegativeFloat = 0.01
    """Weight decay of FAMO's task logits (the paper's ``γ``): pulls the weights back towards
    uniform, so a task's weight follows its recent progress, not all its history. The authors'
    MT10 SAC script uses 0.01."""
    famo_epsilon: PositiveFloat = 1e-8
    """Added to each task's loss inside FAMO's logarithms and ratios, so a loss near 0 stays
    finite (FAMO's code uses 1e-8)."""

    @model_validator(mode="after")
    def _one_way_to_balance(self) -> MultitaskConfig:
        """FAMO replaces the plain sum of the tasks' gradients; it is not combined with PCGrad
        or CAGrad."""
        if self.loss_weighting == "famo" and self.gradients != "sum":
            raise ValueError(
                f"loss_weighting: famo is not combined with "
                f"gradients: {self.gradients} (FAMO is an alternative to combining the tasks' "
                "gradients): choose one, or gradients: sum"
            )
        return self


class TorsoMixtureConfig(ConfigModel):
    """A task-conditioned torso (``learner.model.torso_mixture``): several expert MLPs (each of
    ``learner.model.torso``'s widths) mixed per task through a learned task embedding, instead of
    one MLP that every task shares whole."""

    kind: Literal["moe", "moore", "soft_modular"] = "moe"
    """``moe``: the experts' outputs weighted by a softmax gate of the task's embedding (a
    mixture of experts conditioned on the task, as in CARE, Sodhani et al. 2021). ``moore``:
    the experts' outputs made orthonormal per input (Gram–Schmidt, as a QR factorisation),
    combined by weights from the task's embedding, then ``tanh`` (mixture of orthogonal
    experts, Hendawy et al. 2024). ``soft_modular``: each torso layer is ``experts`` modules,
    and a routing network reading the state and the task decides how much of each module's
    output feeds each module of the next layer (soft modularization, Yang et al. 2020; needs
    at least two ``torso`` widths)."""
    experts: int = Field(default=4, ge=2)
    """Expert MLPs, or modules per layer for ``soft_modular`` (``moore`` needs no more than the
    torso's output width)."""
    task_embedding: int = Field(default=32, ge=1)
    """Width of each task's learned embedding (it drives the experts' weights)."""
