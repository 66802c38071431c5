"""From the learner's input back to the replay's: a :class:`~mtrl.learner.batch.TaskBatch`
(tensors, on the learner's device) as an :class:`~mtrl.actors.unroll.UnrollBuffer` (numpy, on
the host), the form :meth:`mtrl.replay.TaskReplay.add_unroll` copies in.

On the CPU the arrays are views of the batch's tensors (which are themselves views of the
actors' unroll slots), so nothing is copied twice; the replay's copy is the only one, and the
trainer may hand the slots back as soon as ``update`` returns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from mtrl.actors.unroll import UnrollBuffer
from mtrl.learner.batch import TaskBatch

__all__ = ["batch_to_unroll", "host_arrays"]


def host_arrays(x: Any) -> Any:
    """A tensor (or nested dict of tensors) as numpy arrays on the host."""
    if isinstance(x, dict):
        return {k: host_arrays(v) for k, v in x.items()}
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def batch_to_unroll(batch: TaskBatch) -> UnrollBuffer:
    """``batch`` as an unroll buffer; every step carries the batch's ``policy_version`` (the
    oldest that acted in it: a batch keeps no per-step versions)."""
    rewards = host_arrays(batch.rewards)
    return UnrollBuffer(
        task=batch.task,
        obs=host_arrays(batch.obs),
        actions=host_arrays(batch.actions),
        behaviour_logp=host_arrays(batch.behaviour_logp),
        rewards=rewards,
        terminated=host_arrays(batch.terminated),
        truncated=host_arrays(batch.truncated),
        valid=host_arrays(batch.valid),
        versions=np.full(rewards.shape[0], batch.policy_version, np.int64),
        core_state=None if batch.core_state is None else host_arrays(batch.core_state),
    )
