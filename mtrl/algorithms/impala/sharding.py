"""Model parallel learners: task-sharded per-task modules, and an FSDP-sharded torso.

**Task sharding.** Each rank owns the encoders and policy heads (and per-task recurrent cores,
where the model has them) of a subset of tasks (greedy balance of their parameter counts),
holds only those, takes only those tasks' batches and computes only their losses; the number
of tasks is then bounded by the sum of the devices' memory, not one device's. The shared torso,
a shared recurrent core and the stacked value head (``[K, H]``, small) are
replicated and their gradients summed as in data parallel; a per-task module's gradient is
complete on its owner. The update equals one process's update on all tasks' batches.

**FSDP.** For a torso too large for one device: ``torch.distributed.fsdp.fully_shard`` splits
its parameters, gradients and optimiser state across ranks (all-gather before forward and
backward, reduce-scatter of gradients), while encoders, heads and a recurrent core stay
replicated as in data parallel. The learner calls the torso once per update on every rank
(FSDP's collectives must line up), even on a rank without batches.

Both build on :class:`mtrl.algorithms.impala.data_parallel.DataParallelLearner`: the global
sample count, the PopArt moment sums and the metrics are all-reduced the same way, and the
gradient norm is clipped over all ranks' parameters.

**Checkpoints.** ``state_dict()`` is a collective here: every rank calls it and gets the *whole*
learner — every task's modules, the full torso, and the optimiser state of every parameter keyed
by parameter name (``torch.distributed.checkpoint.state_dict``), not by a rank-local index — so
the file rank 0 writes resumes any rank, and any world size whose ranks can hold their share.
``load_state_dict`` takes that whole state on every rank and keeps each rank's part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from mtrl.algorithms.impala.data_parallel import DataParallelLearner
from mtrl.learner.batch import TaskBatch
from mtrl.learner.distributed import broadcast_parameters, to_cpu
from mtrl.learner.optim import group_order

__all__ = ["FSDPLearner", "RemoteTask", "TaskShardedLearner", "assign_tasks", "shard_tasks"]

_PER_TASK = ("encoders", "policy_heads")
"""Per-task module lists of every model; a model names its own in ``per_task_modules``."""


def _per_task(model: nn.Module) -> tuple[str, ...]:
    return tuple(getattr(model, "per_task_modules", _PER_TASK))


def assign_tasks(model: nn.Module, world_size: int) -> list[int]:
    """Owner rank of each task: largest tasks first, each to the least-loaded rank."""
    sizes = [sum(p.numel() for p in model.task_parameters(k)) for k in range(model.num_tasks)]
    load = [0] * world_size
    owners = [0] * model.num_tasks
    for k in sorted(range(model.num_tasks), key=lambda k: (-sizes[k], k)):
        r = min(range(world_size), key=lambda r: (load[r], r))
        owners[k] = r
        load[r] += sizes[k]
    return owners


class RemoteTask(nn.Module):
    """Stands in for a per-task module that lives on another rank; calling it is an error."""

    def __init__(self, task: int, owner: int, what: str) -> None:
        super().__init__()
        self.task, self.owner, self.what = task, owner, what

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"task {self.task}'s {self.what} lives on rank {self.owner}: route the task's "
            "batches (and its actors' inference) to that rank; see learner.local_tasks"
        )

    def extra_repr(self) -> str:
        return f"task={self.task}, owner={self.owner}"


def shard_tasks(model: nn.Module, world_size: int, rank: int) -> list[int]:
    """Drop the per-task modules this rank does not own (in place); returns the owners.

    Call it right after building the model and before moving it to the device, so a device
    only ever holds its own tasks. Idempotent: a sharded model keeps its owners.
    """
    owners = getattr(model, "task_owners", None)
    if owners is None:
        owners = assign_tasks(model, world_size)
        for attr in _per_task(model):
            modules = getattr(model, attr)
            for k, owner in enumerate(owners):
                if owner != rank:
                    modules[k] = RemoteTask(k, owner, attr[:-1].replace("_", " "))
        model.task_owners = owners
    return list(owners)


def merge_optimizer_states(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One name-keyed optimiser state from the ranks' (each holding some parameters): the
    union of their per-parameter states, and of each param group's parameter names. Groups
    match by their ``lr_scale`` (a rank may lack a group: :func:`mtrl.learner.optim.param_groups`)
    and come out in that function's order, or match by position where they have none."""
    state: dict[str, Any] = {}
    groups: dict[Any, dict[str, Any]] = {}
    for part in parts:
        state.update(part["state"])
        for i, g in enumerate(part["param_groups"]):
            merged = groups.setdefault(g.get("lr_scale", i), {**g, "params": []})
            merged["params"] += [n for n in g["params"] if n not in merged["params"]]
    out = list(groups.values())
    if all("lr_scale" in g for g in out):
        out.sort(key=lambda g: group_order(g["lr_scale"]))
    return {"state": state, "param_groups": out}


def select_optimizer_state(full: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """The part of a name-keyed optimiser state that concerns parameters ``names`` (groups
    with none of them left out, as :func:`mtrl.learner.optim.param_groups` leaves them)."""
    groups = [{**g, "params": [n for n in g["params"] if n in names]} for g in full["param_groups"]]
    return {
        "state": {n: v for n, v in full["state"].items() if n in names},
        "param_groups": [g for g in groups if g["params"]],
    }


class TaskShardedLearner(DataParallelLearner):
    """Each rank learns its own tasks' modules; the torso and value head are data parallel."""

    def prepare_model(self, model: nn.Module) -> None:
        self.owners = shard_tasks(model, self.ctx.world_size, self.ctx.rank)
        owned = {id(p) for p in self._owned_parameters(model)}
        broadcast_parameters(p for p in model.parameters() if id(p) not in owned)

    def _owned_parameters(self, model: nn.Module) -> list[nn.Parameter]:
        return [p for k in self.local_tasks for p in model.task_parameters(k)]

    @property
    def local_tasks(self) -> list[int]:
        return [k for k, r in enumerate(self.owners) if r == self.ctx.rank]

    def sharded_parameters(self) -> list[nn.Parameter]:
        return self._owned_parameters(self.model)

    def update(self, batches: Sequence[TaskBatch]) -> dict[str, float]:
        foreign = sorted({b.task for b in batches} - set(self.local_tasks))
        if foreign:  # fail before the first collective, not inside it
            raise ValueError(
                f"rank {self.ctx.rank} got batches of tasks {foreign}, which live on ranks "
                f"{[self.owners[k] for k in foreign]}; it owns {self.local_tasks}"
            )
        return super().update(batches)

    def state_dict(self) -> dict[str, Any]:
        """The whole learner on every rank (a collective): see the module docstring."""
        local = get_optimizer_state_dict(
            self.model, self.optimizer, options=StateDictOptions(full_state_dict=False)
        )
        parts: list[Any] = [None] * self.ctx.world_size
        dist.all_gather_object(parts, to_cpu(local))
        return {
            "model": self.full_model_state(),
            "optimizer": merge_optimizer_states(parts),
            **self._statistics(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Keep this rank's part of a whole learner's state (every rank gets the same)."""
        mine = self.model.state_dict().keys()
        names = {n for n, _ in self.model.named_parameters()}
        self.model.load_state_dict({k: v for k, v in state["model"].items() if k in mine})
        set_optimizer_state_dict(
            self.model,
            self.optimizer,
            select_optimizer_state(state["optimizer"], names),
            options=StateDictOptions(full_state_dict=False),
        )
        self._load_statistics(state)

    def full_model_state(self) -> dict[str, torch.Tensor]:
        state = super().full_model_state()
        for k, owner in enumerate(self.owners):
            part = None
            if owner == self.ctx.rank:
                part = {
                    f"{attr}.{k}.{name}": t
                    for attr in _per_task(self.model)
                    for name, t in getattr(self.model, attr)[k].state_dict().items()
                }
                part = to_cpu(part)
            box = [part]
            dist.broadcast_object_list(box, src=owner)
            state.update(box[0])
        return state


class FSDPLearner(DataParallelLearner):
    """Data parallel with the torso sharded by FSDP (``fully_shard``) across all ranks."""

    def prepare_model(self, model: nn.Module) -> None:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard  # public since torch 2.6

        if not any(True for _ in model.torso.parameters()):
            raise ValueError("model_parallel 'fsdp' shards the torso, but it has no layers")
        broadcast_parameters(model.parameters())
        # The mesh on the model's own device kind: left to itself, fully_shard builds it on
        # CUDA whenever a GPU is visible, and a CPU (gloo) rank then claims GPU LOCAL_RANK.
        device_type = next(model.torso.parameters()).device.type
        fully_shard(model.torso, mesh=init_device_mesh(device_type, (dist.get_world_size(),)))
        # Sum, not average, the replicas' torso gradients: each already carries 1/global count.
        # (As a plain SUM: gloo has no PREMUL_SUM.)
        model.torso.set_gradient_divide_factor(1.0)
        model.torso.set_force_sum_reduction_for_comms(True)

    def sharded_parameters(self) -> list[nn.Parameter]:
        return list(self.model.torso.parameters())

    def state_dict(self) -> dict[str, Any]:
        """The whole learner on every rank (a collective: gathers the torso's shards)."""
        optimizer = get_optimizer_state_dict(
            self.model, self.optimizer, options=StateDictOptions(full_state_dict=True)
        )
        return {
            "model": self.full_model_state(),
            "optimizer": to_cpu(optimizer),
            **self._statistics(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Shard a whole learner's state (every rank gets the same) back over the ranks."""
        full = StateDictOptions(full_state_dict=True)
        set_model_state_dict(self.model, state["model"], options=full)
        set_optimizer_state_dict(self.model, self.optimizer, state["optimizer"], options=full)
        self._load_statistics(state)

    def full_model_state(self) -> dict[str, torch.Tensor]:
        out = {}
        for name, t in self.model.state_dict().items():
            full = t.full_tensor() if hasattr(t, "full_tensor") else t  # gathers DTensors
            out[name] = to_cpu(full)
        return out
