"""Unroll buffers (numpy, actor side) → :class:`~mtrl.learner.batch.TaskBatch` (torch)."""

from __future__ import annotations

import torch

from mtrl.actors.unroll import UnrollBuffer
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import obs_to_tensor


def to_task_batch(u: UnrollBuffer, device: torch.device) -> TaskBatch:
    t = lambda x: torch.as_tensor(x, device=device)  # noqa: E731
    return TaskBatch(
        task=u.task,
        obs=obs_to_tensor(u.obs, device),
        actions=t(u.actions),
        behaviour_logp=t(u.behaviour_logp),
        rewards=t(u.rewards),
        terminated=t(u.terminated),
        truncated=t(u.truncated),
        valid=t(u.valid),
        policy_version=u.policy_version,
    )
