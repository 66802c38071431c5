"""The learner's input: one task's unroll block as device tensors (time-major)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

Obs = torch.Tensor | dict[str, torch.Tensor]


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

    @property
    def num_samples(self) -> int:
        return int(self.valid.sum())
