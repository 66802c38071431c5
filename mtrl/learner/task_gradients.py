"""Combining the tasks' gradients of a rule's shared parameters (``learner.multitask.gradients``
other than ``sum``): each task's gradient of them apart, then one combination of those rows in
place of their sum (:mod:`mtrl.learner.gradient_combination` does the math).

:class:`GradientCombiner` is the one combiner every rule calls (IMPALA on its torso and shared
core, SAC on its actor's and its critics'), so the same setting means the same update whatever
the rule. A rule's replicas sum the rows over the whole batch before :meth:`GradientCombiner.
apply` and pass the same seed, so they stay identical.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import torch

from mtrl.learner.gradient_combination import combine

if TYPE_CHECKING:
    from mtrl.config.multitask import MultitaskConfig

__all__ = ["GradientCombiner", "set_flat_gradients"]


def set_flat_gradients(params: Sequence[torch.Tensor], flat: torch.Tensor) -> None:
    """Make ``flat`` (``[P]``, the parameters' numels end to end) their gradients."""
    for p, g in zip(params, flat.split([p.numel() for p in params]), strict=True):
        p.grad = g.to(p.dtype).view_as(p).clone()


class GradientCombiner:
    """``learner.multitask.gradients`` on one set of shared parameters (module docstring)."""

    def __init__(
        self, multitask: MultitaskConfig, shared: Sequence[torch.Tensor], num_tasks: int
    ) -> None:
        """``shared``: the parameters every task's loss reaches (kept only when combining)."""
        self.how, self.cagrad_c, self.num_tasks = multitask.gradients, multitask.cagrad_c, num_tasks
        self.combining = self.how != "sum"
        """Whether :meth:`apply` replaces the shared parameters' gradients by a combination."""
        self.params = list(shared) if self.combining else []
        """The shared parameters (none unless combining)."""

    def task_gradients(
        self, task_losses: Mapping[int, torch.Tensor], others: Sequence[torch.Tensor] = ()
    ) -> torch.Tensor:
        """Row ``k``: the gradient of ``task_losses[k]`` with respect to the shared parameters,
        flattened, ``[K, P]`` (zeros for a task without a loss here, or one that does not reach
        a parameter); the shared parameters' ``.grad`` is left for :meth:`apply`.

        With ``others`` (the rule's other trainable parameters), this is the loss's backward
        done task by task: each of them gets the sum of the tasks' gradients in its ``.grad``,
        as the whole loss's backward would give it; with a torso call per task, each task's
        pass runs over its own rows only, so the whole costs about one backward. Without, the
        caller runs the loss's backward itself. The losses' graph is kept either way.
        """
        sizes = [p.numel() for p in self.params]
        device = self.params[0].device if self.params else torch.device("cpu")
        out = torch.zeros(self.num_tasks, sum(sizes), dtype=torch.float32, device=device)
        n = len(self.params)
        params = [*self.params, *others]
        for k, loss in task_losses.items():
            grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
            for g, piece in zip(grads[:n], out[k].split(sizes), strict=True):
                if g is not None:
                    piece.copy_(g.reshape(-1))
            for p, g in zip(others, grads[n:], strict=True):
                if g is not None:
                    p.grad = g if p.grad is None else p.grad + g
        return out

    def apply(self, grads: torch.Tensor, seed: int) -> None:
        """Make the combination of ``grads`` (``[K, P]``, every replica's summed) the shared
        parameters' gradients. PCGrad's task order is drawn from ``seed``: replicas pass the
        same one (the rule's step count), so they stay identical."""
        generator = torch.Generator().manual_seed(seed)
        set_flat_gradients(self.params, combine(self.how, grads, self.cagrad_c, generator))
