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

Obs = torch.Tensor | dict[str, torch.Tensor]

#: The per-step arrays of a batch (everything but ``task`` and ``policy_version``).
ARRAY_FIELDS = ("obs", "actions", "behaviour_logp", "rewards", "terminated", "truncated", "valid")


@dataclass
class TaskBatch:
    """``T`` steps of ``N`` env copies of task ``task``; ``obs`` has ``T + 1`` rows."""

    task: int
    obs: Obs  # [T+1, N, *obs]
    actions: torch.Tensor  # [T, N, *raw_action]
    behaviour_logp: torch.Tensor  # [T, N]
    rewards: torch.Tensor  # [T, N] (reward_scale applied)
    terminated: torch.Tensor  # [T, N] bool
    truncated: torch.Tensor  # [T, N] bool
    valid: torch.Tensor  # [T, N] bool; false on reset steps
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
    """A :class:`TaskBatch` on ``device`` from anything with its field names: an actor's unroll
    buffer (numpy arrays; on the CPU the tensors share their memory) or another batch."""
    state = getattr(source, "core_state", None)
    return TaskBatch(
        task=source.task,
        policy_version=source.policy_version,
        core_state=None if state is None else to_device(state, device),
        **{f: obs_to_tensor(getattr(source, f), device) for f in ARRAY_FIELDS},
    )
