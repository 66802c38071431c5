"""One update's data as samples: the valid steps of every unroll, grouped by task, and the
shuffled minibatches PPO's epochs walk through.

A feed-forward policy's steps are independent given their observations, so PPO shuffles single
steps (as SB3 and CleanRL do), not whole unrolls: each minibatch mixes steps of every env copy
and of every task in proportion to the batch. Reset steps (``valid`` false) never enter.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

import torch

from mtrl.learner.batch import TaskBatch

__all__ = ["TaskSamples", "from_batch", "merge_by_task", "minibatches", "take_rows"]

Obs = torch.Tensor | dict[str, "Obs"]


def take_rows(x: Obs, idx: torch.Tensor) -> Obs:
    """Rows ``idx`` of a tensor or of every tensor in a (nested) dict of them."""
    if isinstance(x, dict):
        return {k: take_rows(v, idx) for k, v in x.items()}
    return x[idx]


def _cat(xs: Sequence[Obs]) -> Obs:
    if isinstance(xs[0], dict):
        return {k: _cat([x[k] for x in xs]) for k in xs[0]}  # type: ignore[index]
    return torch.cat(xs)  # type: ignore[arg-type]


def _steps(x: Obs, t: int) -> Obs:
    """``x [T + 1, N, ...]`` (or a dict of such) as ``[T * N, ...]`` without its last row."""
    if isinstance(x, dict):
        return {k: _steps(v, t) for k, v in x.items()}
    return x[:t].reshape(-1, *x.shape[2:])


@dataclass(frozen=True)
class TaskSamples:
    """``S`` valid steps of one task, each row one step; what the loss reads of them."""

    task: int
    obs: Obs
    """``[S, *obs]`` (or a dict of such), as the actor saw them."""
    actions: torch.Tensor
    """``[S, *raw_action]``: the actions taken."""
    behaviour_logp: torch.Tensor
    """``[S]``: log μ(a|s) of the policy that acted, as the unroll recorded it."""
    advantages: torch.Tensor
    """``[S]``: GAE advantages, normalised or scaled as the settings say."""
    targets: torch.Tensor
    """``[S]``: the λ-returns, PopArt-normalised (the value head's units)."""
    old_values: torch.Tensor
    """``[S]``: the value head's output before the update, in the same units (value clip)."""
    weights: torch.Tensor
    """``[S]``: the unroll's loss weight (the trainer's data-mix correction)."""

    def __len__(self) -> int:
        return int(self.behaviour_logp.shape[0])

    def take(self, idx: torch.Tensor) -> TaskSamples:
        """Rows ``idx`` of every field."""
        return TaskSamples(
            self.task,
            take_rows(self.obs, idx),
            *(getattr(self, f.name)[idx] for f in fields(self)[2:]),
        )


def from_batch(
    batch: TaskBatch,
    advantages: torch.Tensor,
    targets: torch.Tensor,
    old_values: torch.Tensor,
) -> TaskSamples:
    """The valid steps of ``batch`` with their ``[T, N]`` advantages, normalised targets and
    old normalised values, flattened to rows."""
    t = batch.valid.shape[0]
    keep = batch.valid.reshape(-1).nonzero().squeeze(1)
    flat = TaskSamples(
        batch.task,
        _steps(batch.obs, t),
        batch.actions.reshape(t * batch.valid.shape[1], *batch.actions.shape[2:]),
        batch.behaviour_logp.reshape(-1),
        advantages.reshape(-1),
        targets.reshape(-1),
        old_values.reshape(-1),
        torch.full_like(advantages.reshape(-1), float(batch.loss_weight)),
    )
    return flat.take(keep)


def merge_by_task(parts: Sequence[TaskSamples]) -> list[TaskSamples]:
    """One :class:`TaskSamples` per task (in order of first appearance), its parts' rows
    concatenated."""
    groups: dict[int, list[TaskSamples]] = {}
    for p in parts:
        groups.setdefault(p.task, []).append(p)
    out = []
    for task, ps in groups.items():
        if len(ps) == 1:
            out.append(ps[0])
            continue
        out.append(
            TaskSamples(
                task,
                _cat([p.obs for p in ps]),
                *(torch.cat([getattr(p, f.name) for p in ps]) for f in fields(TaskSamples)[2:]),
            )
        )
    return out


def minibatches(
    parts: Sequence[TaskSamples], count: int, generator: torch.Generator | None = None
) -> Iterator[list[TaskSamples]]:
    """One pass over every row of ``parts`` (one per task) in random order, in ``count``
    minibatches of (nearly) equal size; each minibatch is its rows grouped by task (tasks
    without rows in it left out). Fewer rows than ``count``: one row per minibatch."""
    sizes = [len(p) for p in parts]
    total = sum(sizes)
    if total == 0:
        return
    device = parts[0].behaviour_logp.device
    owner = torch.repeat_interleave(torch.arange(len(parts)), torch.tensor(sizes))
    local = torch.cat([torch.arange(n) for n in sizes])
    order = torch.randperm(total, generator=generator)
    for chunk in order.tensor_split(min(count, total)):
        picked: list[TaskSamples] = []
        for i, part in enumerate(parts):
            rows = local[chunk[owner[chunk] == i]]
            if rows.numel():
                picked.append(part.take(rows.to(device)))
        yield picked
