"""Each task's gradient of the shared parameters (torso, shared recurrent core), for two
uses: the torso-gradient-share diagnostic, and ``learner.multitask.gradients`` other than
``sum``, which replaces the shared parameters' gradients by a combination of the per-task ones
(:mod:`mtrl.learner.gradient_combination` does the math)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from mtrl.config import LearnerConfig
from mtrl.learner import diagnostics
from mtrl.learner.gradient_combination import combine

__all__ = ["SharedGradients", "set_flat_gradients", "task_gradients"]


def task_gradients(
    task_losses: Mapping[int, torch.Tensor],
    params: Sequence[torch.Tensor],
    num_tasks: int,
) -> torch.Tensor:
    """Row ``k``: the gradient of ``task_losses[k]`` with respect to ``params``, flattened
    (zeros for a task without a loss here, or one that does not reach a parameter).

    The losses must share a graph that is still alive; it is kept for the caller's backward.
    """
    sizes = [p.numel() for p in params]
    device = params[0].device if params else torch.device("cpu")
    out = torch.zeros(num_tasks, sum(sizes), dtype=torch.float32, device=device)
    for k, loss in task_losses.items():
        grads = torch.autograd.grad(loss, list(params), retain_graph=True, allow_unused=True)
        for g, piece in zip(grads, out[k].split(sizes), strict=True):
            if g is not None:
                piece.copy_(g.reshape(-1))
    return out


def set_flat_gradients(params: Sequence[torch.Tensor], flat: torch.Tensor) -> None:
    """Make ``flat`` (``[P]``, the parameters' numels end to end) their gradients."""
    for p, g in zip(params, flat.split([p.numel() for p in params]), strict=True):
        p.grad = g.to(p.dtype).view_as(p).clone()


class SharedGradients:
    """A learner's per-task view of its shared parameters' gradients."""

    def __init__(self, model: nn.Module, cfg: LearnerConfig, num_tasks: int) -> None:
        self.cfg, self.num_tasks = cfg, num_tasks
        self.combining = cfg.multitask.gradients != "sum"
        """Whether every update replaces the shared gradients by a combination."""
        self.params = model.shared_parameters() if self.combining else []
        shared = {id(p) for p in self.params}
        self.own = [p for p in model.parameters() if p.requires_grad and id(p) not in shared]
        """The other trainable parameters: each reached by one task's loss (or by its row)."""
        self.torso = [q for q in model.torso.parameters() if q.requires_grad]

    def _due(self, version: int) -> bool:
        every = self.cfg.diagnostics_every
        return every > 0 and version % every == 0

    def shares_due(self, version: int, distributed: bool) -> bool:
        """Whether this update measures each task's share of the torso gradient apart (one
        extra backward per task; single-process learners only, where the torso is whole; not
        for a model without torso parameters, ``torso: []``)."""
        return self._due(version) and not distributed and bool(self.torso)

    def shares(self, task_losses: Mapping[int, torch.Tensor]) -> list[float]:
        """Each task's share of the torso gradient (0 for absent tasks)."""
        tasks = sorted(task_losses)
        got = diagnostics.grad_shares([task_losses[k] for k in tasks], self.torso)
        out = [0.0] * self.num_tasks
        for k, share in zip(tasks, got, strict=True):
            out[k] = share
        return out

    def backward(self, task_losses: Mapping[int, torch.Tensor]) -> torch.Tensor:
        """The backward pass task by task, in place of the loss's: every other parameter's
        gradient is the sum of the tasks' (as the loss's backward would give it), and the
        shared parameters' per-task gradients come back as ``[K, P]`` (their ``.grad`` left
        unset for :meth:`apply`). With one torso call per task, each task's pass runs over its
        own rows only: the whole costs about one backward."""
        sizes = [p.numel() for p in self.params]
        device = self.params[0].device
        out = torch.zeros(self.num_tasks, sum(sizes), dtype=torch.float32, device=device)
        n = len(self.params)
        params = [*self.params, *self.own]
        for k, loss in task_losses.items():
            grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
            for g, piece in zip(grads[:n], out[k].split(sizes), strict=True):
                if g is not None:
                    piece.copy_(g.reshape(-1))
            for p, g in zip(self.own, grads[n:], strict=True):
                if g is not None:
                    p.grad = g if p.grad is None else p.grad + g
        return out

    def apply(self, grads: torch.Tensor, version: int) -> list[float] | None:
        """Make the combination of ``grads`` (every replica's, summed) the shared parameters'
        gradients; returns the torso gradient shares when due (free: the rows are at hand)."""
        mt = self.cfg.multitask
        # Replicas draw PCGrad's task order from the same seed, so they stay identical.
        generator = torch.Generator().manual_seed(version)
        set_flat_gradients(self.params, combine(mt.gradients, grads, mt.cagrad_c, generator))
        if not self._due(version):
            return None
        norms = grads.double().norm(dim=1)
        total = float(norms.sum())
        return [float(n) / total if total > 0 else 0.0 for n in norms]
