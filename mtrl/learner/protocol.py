"""What a learning rule is to the rest of mtrl: the :class:`Learner` protocol.

The trainer, the Anakin loop, checkpoints and the final evaluation talk to a learner through
these members only, so a rule (IMPALA's V-trace,
:class:`mtrl.algorithms.impala.learner.ImpalaLearner`; a replay-based one; a plugin's) can take
its place. Rules are chosen by
``learner.algorithm`` through the registry the ``mtrl_register_algorithms`` hook fills
(:mod:`mtrl.plugins.algorithm_registrar`).

The loop a learner serves::

    learner.set_progress(env_steps / total_env_steps)   # schedules (learning rate, ...)
    metrics = learner.update(batches)                   # one step on a mixed batch of tasks
    pool.publish(learner.model, learner.version)        # actors act with the new weights
    ... learner.pop_diagnostics() on each metric record; state_dict() in checkpoints
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from mtrl.learner.batch import TaskBatch


@runtime_checkable
class Learner(Protocol):
    """One learning rule over the multi-task model (see the module docstring)."""

    model: nn.Module
    """The :class:`~mtrl.learner.model.MultiTaskModel` it trains; actors act with its weights."""
    device: torch.device
    """Where the model lives; batches are moved here."""
    version: int
    """Incremented by every update: the policy version actors stamp on their unrolls."""

    @property
    def local_tasks(self) -> list[int]:
        """Tasks whose batches this learner takes (all, unless tasks are sharded over ranks)."""
        ...

    def set_progress(self, progress: float) -> None:
        """The run's progress in [0, 1] (env steps over ``total_env_steps``), for schedules."""
        ...

    def update(self, batches: Sequence[TaskBatch]) -> dict[str, float]:
        """One learning step on a mixed batch (one :class:`TaskBatch` per unroll or Anakin
        rollout); returns flat metrics (``losses/...``, ``popart/...``)."""
        ...

    def pop_diagnostics(self) -> dict[str, float]:
        """Per-task diagnostics averaged since the last call (logged with each record)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs, as plain data (loads with ``weights_only``)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s output."""
        ...
