"""What loosely synchronised replicas average, and the pure math of how.

Under ``learner.parallel.sync: local_sgd | diloco | async`` each learner replica updates on its
own batches and, now and then, the replicas combine what they learned
(:mod:`mtrl.sync.loose_sync`, :mod:`mtrl.sync.gossip`). What they combine is a
:class:`ReplicaState`, which a learning rule gives and takes through :class:`Reconcilable`:

- ``params``: every model parameter as one flat float32 vector, **with PopArt's value heads in
  their unnormalised form** (row i: ``σ_i w_i`` and ``σ_i b_i + μ_i``). Replicas' statistics
  drift apart between syncs, so their normalised heads mean different things; averaging the
  heads as the returns they predict and re-normalising them by the averaged statistics keeps
  the averaged head's predictions the mean of the replicas' (exactly, for the same features).
  The outer step of DiLoCo runs in this form too, so its anchor and momentum do not depend on
  the statistics of the moment.
- ``stats``: float64 per-task statistics averaged with the parameters (PopArt's first and
  second moments μ and ν, the value-error scale, the entropy multipliers). Averaging ν, a second
  moment, is averaging the replicas' return distributions; σ follows from the averaged μ and ν.
- ``seen``: per-task flags combined with OR (a task one replica has seen is seen).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from torch import nn

__all__ = [
    "Reconcilable",
    "ReplicaState",
    "flatten",
    "mean_state",
    "outer_step",
    "pack",
    "unflatten_into",
    "unpack",
]


@dataclass
class ReplicaState:
    """One replica's learned state in the form replicas average (module docstring)."""

    params: torch.Tensor
    """All parameters, flat float32, value heads unnormalised."""
    stats: torch.Tensor
    """Per-task statistics, flat float64, averaged."""
    seen: torch.Tensor
    """Per-task flags, bool, OR-ed."""

    def numel_bytes(self) -> int:
        """Bytes of one copy (what one replica sends to share it)."""
        return sum(t.numel() * t.element_size() for t in (self.params, self.stats, self.seen))


@runtime_checkable
class Reconcilable(Protocol):
    """A learning rule whose replicas can be averaged (the ``loose_sync`` parallel mode)."""

    def replica_state(self) -> ReplicaState:
        """This replica's state as :class:`ReplicaState` (copies, not views)."""
        ...

    def load_replica_state(self, state: ReplicaState) -> None:
        """Take ``state`` (an average of several replicas') as this replica's; the optimiser's
        own state is kept."""
        ...


def flatten(tensors: Sequence[torch.Tensor], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``tensors`` as one flat detached vector of ``dtype`` (a copy)."""
    if not tensors:
        return torch.zeros(0, dtype=dtype)
    return torch.cat([t.detach().reshape(-1).to(dtype) for t in tensors])


def unflatten_into(flat: torch.Tensor, tensors: Sequence[torch.Tensor]) -> None:
    """Copy ``flat`` (as from :func:`flatten`) back into ``tensors``, in order."""
    sizes = [t.numel() for t in tensors]
    if flat.numel() != sum(sizes):
        raise ValueError(f"a flat state of {flat.numel()} values for {sum(sizes)} elements")
    with torch.no_grad():
        for t, v in zip(tensors, flat.split(sizes), strict=True):
            t.copy_(v.view_as(t).to(t.dtype))


def outer_step(
    anchor: torch.Tensor,
    momentum: torch.Tensor,
    mean_delta: torch.Tensor,
    lr: float,
    beta: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DiLoCo's outer step: SGD with Nesterov momentum on the outer gradient.

    ``mean_delta`` is the replicas' mean of ``anchor − θ_r`` (the anchor: the parameters all
    replicas started the period from). Returns ``(anchor', momentum')`` with
    ``momentum' = β·momentum + Δ`` and ``anchor' = anchor − lr·(Δ + β·momentum')``
    (``torch.optim.SGD(nesterov=True)``'s update). With ``lr = 1`` and ``β = 0`` the new anchor
    is the replicas' mean parameters: local SGD.
    """
    if not anchor.shape == momentum.shape == mean_delta.shape:
        raise ValueError(
            f"outer_step: anchor {tuple(anchor.shape)}, momentum {tuple(momentum.shape)} and "
            f"delta {tuple(mean_delta.shape)} must have one shape"
        )
    new_momentum = beta * momentum + mean_delta
    return anchor - lr * (mean_delta + beta * new_momentum), new_momentum


def mean_state(states: Sequence[ReplicaState]) -> ReplicaState:
    """The uniform mixture of ``states``: parameters and statistics averaged, flags OR-ed."""
    if not states:
        raise ValueError("mean_state of no replica states")
    params = torch.stack([s.params for s in states]).mean(0)
    stats = torch.stack([s.stats for s in states]).mean(0)
    seen = torch.stack([s.seen for s in states]).any(0)
    return ReplicaState(params, stats, seen)


def pack(
    model: nn.Module,
    mu: torch.Tensor,
    sigma: torch.Tensor,
    stats: Sequence[torch.Tensor],
    seen: torch.Tensor,
) -> ReplicaState:
    """A learner's :class:`ReplicaState`: ``model``'s parameters with its value heads
    (``value_weight [K, H]``, ``value_bias [K]``) unnormalised by PopArt's ``mu`` and
    ``sigma`` (0 and 1 without PopArt), ``stats`` flattened in float64, ``seen`` copied."""
    with torch.no_grad():
        unnormalised = {
            id(model.value_weight): model.value_weight * sigma.unsqueeze(1),
            id(model.value_bias): model.value_bias * sigma + mu,
        }
    params = [unnormalised.get(id(p), p) for p in model.parameters()]
    return ReplicaState(flatten(params), flatten(stats, torch.float64), seen.clone())


@torch.no_grad()
def unpack(
    state: ReplicaState,
    model: nn.Module,
    stats: Sequence[torch.Tensor],
    seen: torch.Tensor,
    mu_sigma: Callable[[], tuple[torch.Tensor, torch.Tensor]],
) -> None:
    """:func:`pack` undone into a learner: the statistics first, then the parameters, the
    value heads normalised by the new statistics (``mu_sigma()`` reads them)."""
    device = seen.device
    unflatten_into(state.stats.to(device), stats)
    seen.copy_(state.seen.to(device))
    unflatten_into(state.params.to(device), list(model.parameters()))
    mu, sigma = mu_sigma()
    model.value_weight.div_(sigma.unsqueeze(1))
    model.value_bias.sub_(mu).div_(sigma)
