"""The features a learner update starts from: every batch through its task's encoder, the
shared torso and (with a recurrent core) the core over time from each unroll's initial state.

One torso call over every batch's rows is faster than one per batch, and a sharded (FSDP) torso
needs every replica to call it exactly once per update, even a replica with no batches. When
the tasks' gradients are combined (``learner.multitask.gradients``; FSDP is then refused) the
torso runs once per task instead, so that each task's backward reaches its own rows only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel
from mtrl.learner.recurrent import sequence_resets
from mtrl.learner.torsos import row_tasks

__all__ = ["embed_batches", "per_task_calls"]


def per_task_calls(
    f: Callable[[torch.Tensor, int], torch.Tensor],
    tasks: Sequence[int],
    xs: Sequence[torch.Tensor],
) -> list[torch.Tensor]:
    """``f(rows, task)`` of each ``xs[i]``, one call per task over its rows (in ``xs``'
    order)."""
    members: dict[int, list[int]] = {}
    for i, task in enumerate(tasks):
        members.setdefault(task, []).append(i)
    out: list[torch.Tensor] = [xs[0]] * len(xs)
    for task, idx in members.items():
        ys = f(torch.cat([xs[i] for i in idx]), task).split([xs[i].shape[0] for i in idx])
        for i, y in zip(idx, ys, strict=True):
            out[i] = y
    return out


def core_state(batch: TaskBatch, size: int) -> torch.Tensor:
    """The batch's initial core states ``[N, size]``; a clear error where it has none."""
    state = batch.core_state
    if state is None or tuple(state.shape) != (batch.valid.shape[1], size):
        got = "none" if state is None else f"shape {tuple(state.shape)}"
        raise ValueError(
            f"a batch of task {batch.task} has core_state {got}, but the model's recurrent core "
            f"needs [{batch.valid.shape[1]}, {size}]: unrolls of a recurrent model carry each "
            "env copy's state at their start (unroll_fields(..., state_size=...))"
        )
    return state


def embed_batches(
    model: MultiTaskModel,
    batches: Sequence[TaskBatch],
    per_task: bool,
    encoder_dim: int,
    device: torch.device,
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Features ``[T+1, N, H]`` of every batch, and the torso's output over all rows (so a
    replica with no batches, whose input is ``[0, encoder_dim]``, still calls the torso).
    ``per_task``: one torso call per task rather than one in all."""
    feats = [model.encoders[b.task](b.obs) for b in batches]
    flat = [f.reshape(-1, f.shape[-1]) for f in feats]
    if not flat:
        flat = [torch.zeros(0, encoder_dim, device=device)]
    tasks = [b.task for b in batches]
    if per_task and feats:
        hs = per_task_calls(model.run_torso, tasks, flat)
        h_all = torch.cat(hs)
    else:
        x = torch.cat(flat)
        rows: torch.Tensor | int = 0
        if model.conditioned and feats:
            rows = row_tasks(tasks, [f.shape[0] for f in flat], device)
        h_all = model.run_torso(x, rows)
        hs = list(h_all.split([f.shape[0] for f in flat])[: len(feats)])
    hs = [h.reshape(*f.shape[:-1], -1) for h, f in zip(hs, feats, strict=True)]
    if model.recurrent:
        hs = model.run_cores(
            [b.task for b in batches],
            hs,
            [core_state(b, model.state_size) for b in batches],
            [sequence_resets(b.valid) for b in batches],
        )
    return h_all, hs
