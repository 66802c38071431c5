"""torch.distributed for learner replicas (launched by torchrun), whatever their rule: where
this process sits among them (:class:`DistContext`), and the collectives every rule's replicas
build on: one start for all (:func:`broadcast_parameters`), the whole batch's gradient
(:func:`all_reduce_gradients`), CPU copies for checkpoints (:func:`to_cpu`).

The process group's backend follows the device (:class:`mtrl.learner.device.Accelerator`): gloo
on CPU, nccl on CUDA, xla on TPU. IMPALA's replicas:
:mod:`mtrl.algorithms.impala.data_parallel`; SAC's: :mod:`mtrl.algorithms.sac.parallel`.
"""

from __future__ import annotations

import datetime
import importlib
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import torch
import torch.distributed as dist
from torch import nn

from mtrl.errors import UserError
from mtrl.learner.device import Accelerator, resolve_device

__all__ = ["DistContext", "all_reduce_gradients", "broadcast_parameters", "to_cpu"]


@dataclass(frozen=True)
class DistContext:
    """Where this process sits among the learner replicas (torchrun's environment)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DistContext:
        """Read ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` (set by torchrun);
        a process started without them is the single replica."""
        env = os.environ if environ is None else environ
        try:
            world = int(env.get("WORLD_SIZE", "1"))
            ctx = cls(
                rank=int(env.get("RANK", "0")),
                world_size=world,
                local_rank=int(env.get("LOCAL_RANK", "0")),
                local_world_size=int(env.get("LOCAL_WORLD_SIZE", str(world))),
            )
        except ValueError as e:
            raise UserError(f"torchrun environment: {e}; RANK/WORLD_SIZE must be integers") from e
        if not 0 <= ctx.rank < ctx.world_size:
            raise UserError(f"torchrun environment: RANK={ctx.rank} not in [0, {ctx.world_size})")
        return ctx

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the replica that writes checkpoints and logs."""
        return self.rank == 0

    def device(self, name: str) -> torch.device:
        """The config's device for this replica (``cuda`` → this local rank's GPU; ``auto`` →
        the CPU when this node has fewer GPUs than replicas)."""
        return resolve_device(name, self.local_rank, self.local_world_size)

    def init(self, device: torch.device, timeout_s: float = 300.0) -> None:
        """Join the process group (``env://``: MASTER_ADDR/PORT from torchrun); no-op alone."""
        if not self.distributed or dist.is_initialized():
            return
        backend = Accelerator(device).dist_backend
        kwargs: dict[str, object] = {"init_method": "env://"}
        if backend == "xla":
            importlib.import_module("torch_xla.distributed.xla_backend")  # registers "xla"
            kwargs = {"init_method": "xla://"}
        if backend == "nccl":
            torch.cuda.set_device(device)
        dist.init_process_group(
            backend,
            rank=self.rank,
            world_size=self.world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
            **kwargs,
        )

    def all_sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums of ``values`` over all ranks (collective: every rank must call it).

        For decisions the replicas must share, e.g. stop once the summed env steps reach the
        budget, so no rank leaves while the others wait in an update's all-reduce.
        """
        if not self.distributed:
            return [float(v) for v in values]
        backend = dist.get_backend()
        if backend == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        elif backend == "xla":
            device = resolve_device("xla")
        else:
            device = torch.device("cpu")
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
        dist.all_reduce(t)
        return t.tolist()

    def destroy(self, wait_for_peers: bool = True) -> None:
        """Leave the process group (if this process joined one).

        By default waits for every rank first, so none tears down its connections while a
        peer still uses them (gloo then aborts the peer). Pass False on an error path, where
        the peers may never arrive.
        """
        if dist.is_initialized():
            if wait_for_peers:
                dist.barrier()
            dist.destroy_process_group()

    def exit_process(self, code: int) -> NoReturn:
        """End this replica's process once every rank got here, without tearing gloo down.

        For the end of a successful torchrun job, when all results are on disk: on a loaded
        machine gloo's teardown (``destroy_process_group`` or the interpreter's exit) now and
        then aborts a rank ("terminate called without an active exception") after its work is
        done, which fails the whole launch for nothing. The barrier keeps any rank from leaving
        while a peer still talks to it; ``os._exit`` then skips the teardown.
        """
        if dist.is_initialized():
            dist.barrier()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def to_cpu(x: Any) -> Any:
    """A detached CPU copy of every tensor in ``x`` (nested dicts, lists, tuples)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().clone()
    if isinstance(x, dict):
        return {k: to_cpu(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(to_cpu(v) for v in x)
    return x


def broadcast_parameters(params: Iterable[torch.Tensor], src: int = 0) -> None:
    """Copy rank ``src``'s values of ``params`` to every rank (one flat broadcast)."""
    params = list(params)
    if not params:
        return
    with torch.no_grad():
        flat = torch.cat([p.detach().reshape(-1) for p in params])
        dist.broadcast(flat, src)
        for p, v in zip(params, flat.split([p.numel() for p in params]), strict=True):
            p.copy_(v.view_as(p))


def all_reduce_gradients(params: Sequence[nn.Parameter]) -> None:
    """SUM-all-reduce the gradients of ``params``: one flat buffer per dtype, with presence flags.

    A missing (None) gradient counts as zeros; a parameter whose gradient is missing on every
    rank keeps None, exactly as on one process over the union of the batches.
    """
    groups: dict[torch.dtype, list[nn.Parameter]] = {}
    for p in params:
        groups.setdefault(p.dtype, []).append(p)
    for dtype, group in groups.items():
        device = group[0].device
        sizes = [p.numel() for p in group]
        pieces = [
            p.grad.reshape(-1) if p.grad is not None else torch.zeros(n, dtype=dtype, device=device)
            for p, n in zip(group, sizes, strict=True)
        ]
        flags = torch.tensor([p.grad is not None for p in group], dtype=dtype, device=device)
        flat = torch.cat([*pieces, flags])
        dist.all_reduce(flat)
        grads, seen = flat[: -len(group)].split(sizes), flat[-len(group) :].tolist()
        for p, g, s in zip(group, grads, seen, strict=True):
            p.grad = g.view_as(p) if s > 0 else None
