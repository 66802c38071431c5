"""The learner's input: one task's unroll block as device tensors (time-major).

With a recurrent model the block also carries ``core_state``: each env copy's core state at the
unroll's start, which the learner runs the core from (:mod:`mtrl.learner.recurrent`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from mtrl.learner.device import to_device
from mtrl.learner.model import obs_to_tensor
from mtrl.learner.unroll_record import ARRAY_FIELDS, UnrollRecord

Obs = torch.Tensor | dict[str, torch.Tensor]

__all__ = ["ARRAY_FIELDS", "Obs", "TaskBatch", "task_batch"]


@dataclass
class TaskBatch(UnrollRecord[torch.Tensor]):
    """An unroll record as tensors on the learner's device (:class:`UnrollRecord`'s fields,
    ``obs`` a tensor or dict of tensors), with the oldest weights version that acted in it."""

    policy_version: int
    loss_weight: float = 1.0
    """Multiplies this batch's loss (policy, value and entropy terms): the trainer's per-task
    weight that turns the data mix into the target mix (:mod:`mtrl.train.loss_weights`)."""
    core_state: torch.Tensor | None = None
    """``[N, S]`` float32: each copy's recurrent state before row 0 (None: feed-forward)."""

    @property
    def num_samples(self) -> int:
        """Steps that enter the loss (reset steps excluded)."""
        return int(self.valid.sum())

    @property
    def num_steps(self) -> int:
        """Env steps the batch holds, ``T x N``: its size as data, whatever the resets."""
        return int(self.valid.numel())


def task_batch(source: Any, device: torch.device | str) -> TaskBatch:
    """A :class:`TaskBatch` on ``device`` from another unroll record with a ``policy_version``:
    an actor's unroll buffer or a replayed sequence batch (numpy arrays; on the CPU the tensors
    share their memory), or another batch."""
    state = getattr(source, "core_state", None)
    return TaskBatch(
        task=source.task,
        policy_version=source.policy_version,
        core_state=None if state is None else to_device(state, device),
        **{f: obs_to_tensor(getattr(source, f), device) for f in ARRAY_FIELDS},
    )
