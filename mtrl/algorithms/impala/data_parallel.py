"""Data-parallel learner replicas on torch.distributed (launched by torchrun).

Sebulba's learner (Hessel et al. 2021, "Podracer architectures for scalable RL"): N replicas,
one per device or CPU process, each fed by its own local actors; every update all-reduces
so that all replicas take the *same* step as one learner would on the union of their batches:

1. the count of valid samples is summed first, so each replica divides its loss *sums* by the
   global count, and the SUM of the replicas' gradients is the whole batch's mean gradient
   (a replica's batch may hold any subset of tasks, or none);
2. PopArt moment sums ``[3, K]`` are summed (float64), so every replica applies the same
   statistics update (rlax's ``axis_name``);
3. gradients are summed in one flat buffer; a parameter no replica touched keeps ``grad=None``
   (as on one process, so Adam skips it there too), else a missing gradient counts as zeros;
4. the global gradient norm is clipped identically everywhere, then every replica steps.

Initial parameters are broadcast from rank 0, so replicas stay identical bit for bit
(:mod:`mtrl.learner.distributed` has the process group and the collectives).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.distributed as dist
from torch import nn

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.config import LearnerConfig
from mtrl.learner.distributed import (
    DistContext,
    all_reduce_gradients,
    broadcast_parameters,
    to_cpu,
)

__all__ = ["DataParallelLearner", "clip_global_grad_norm"]


def _norm_sq(tensors: Iterable[torch.Tensor], device: torch.device) -> torch.Tensor:
    total = torch.zeros((), dtype=torch.float32, device=device)
    for t in tensors:
        total = total + t.float().pow(2).sum()
    return total


def _local(g: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard (FSDP), or the tensor itself."""
    to_local = getattr(g, "to_local", None)
    return to_local() if to_local is not None else g


def clip_global_grad_norm(
    replicated: Sequence[nn.Parameter],
    sharded: Sequence[nn.Parameter],
    max_norm: float,
    device: torch.device,
) -> torch.Tensor:
    """Clip like ``nn.utils.clip_grad_norm_`` over all replicas' parameters; returns the norm.

    ``replicated`` gradients are identical on every rank (already all-reduced) and count once;
    ``sharded`` ones live on one rank each (task-owned modules, FSDP shards) and are summed
    over ranks. Every rank gets the same norm and the same clip coefficient.
    """
    rep = [p.grad for p in replicated if p.grad is not None]
    own = [_local(p.grad) for p in sharded if p.grad is not None]
    sq = _norm_sq(own, device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(sq)
    norm = (sq + _norm_sq(rep, device)).sqrt()
    coef = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    with torch.no_grad():
        for g in (*rep, *own):
            g.mul_(coef.to(g.dtype))
    return norm


class DataParallelLearner(ImpalaLearner):
    """A learner replica: the same update as
    :class:`~mtrl.algorithms.impala.learner.ImpalaLearner` on the union of all replicas' batches.

    Needs an initialised process group (:meth:`DistContext.init`). Subclasses that keep some
    parameters on one rank only list them in :meth:`sharded_parameters`.
    """

    distributed = True

    def __init__(
        self,
        model: nn.Module,
        cfg: LearnerConfig,
        task_names: Sequence[str],
        ctx: DistContext | None = None,
        lr_scales: Sequence[float] | None = None,
    ) -> None:
        if not dist.is_initialized():
            raise RuntimeError(
                f"{type(self).__name__} needs a torch.distributed process group: call "
                "DistContext.from_env().init(device) first (under torchrun)"
            )
        self.ctx = ctx or DistContext(rank=dist.get_rank(), world_size=dist.get_world_size())
        self.prepare_model(model)
        super().__init__(model, cfg, task_names, lr_scales)
        sharded = {id(p) for p in self.sharded_parameters()}
        self._replicated = [p for p in model.parameters() if id(p) not in sharded]

    def prepare_model(self, model: nn.Module) -> None:
        """Make replicas start equal: broadcast rank 0's parameters."""
        broadcast_parameters(model.parameters())

    def sharded_parameters(self) -> list[nn.Parameter]:
        """Parameters whose gradient is complete on this rank alone (none in plain DP)."""
        return []

    def reduce_moment_sums(self, sums: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(sums)
        return sums

    def _global_count(self, count: int) -> int:
        t = torch.tensor([count], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return int(t.item())

    def _reduce_gradients(self) -> None:
        all_reduce_gradients(self._replicated)

    def _reduce_task_gradients(self, grads: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(grads)
        return grads

    def _clip_gradients(self) -> torch.Tensor:
        return clip_global_grad_norm(
            self._replicated, self.sharded_parameters(), self.cfg.max_grad_norm, self.device
        )

    def _reduce_metric_sums(self, sums: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(sums)
        return sums

    def full_model_state(self) -> dict[str, torch.Tensor]:
        """The whole model's state dict on the CPU, identical on every rank (a collective in
        sharded subclasses: every rank must call it). For checkpoints and inference copies."""
        return to_cpu(self.model.state_dict())
