"""The one record of an unroll: the fields every stage of the data path shares.

A block of ``T`` time steps of ``N`` env copies of one task, time-major, moves from the actor
that writes it (:class:`mtrl.actors.unroll.UnrollBuffer`, numpy arrays in place) through the
replay that stores it (:class:`mtrl.replay.storage.SequenceBatch`) to the learner that trains on
it (:class:`mtrl.learner.batch.TaskBatch`, tensors on the learner's device). Each stage adds
what is its own (the versions that acted, a loss weight, a burn-in mask) to these fields, named
and ordered alike, so a stage reads the one before by name (:func:`mtrl.learner.batch.task_batch`
converts :data:`ARRAY_FIELDS`) and a new field is added here once.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Generic, TypeVar

import numpy as np

A = TypeVar("A")


@dataclass
class UnrollRecord(Generic[A]):
    """``T`` steps of ``N`` env copies of task ``task``; ``A`` is the array type (numpy or
    torch). ``obs`` has ``T + 1`` rows (row ``T``: the bootstrap observation), and is an array
    or a (nested) dict of arrays for structured observation spaces."""

    task: int
    obs: Any  # [T+1, N, *obs]: A, or a (nested) dict of A
    actions: A  # [T, N, *raw_action]
    behaviour_logp: A  # [T, N] float32: log-probability of the action under the acting policy
    rewards: A  # [T, N] float32, the task's reward_scale applied
    terminated: A  # [T, N] bool: the episode ended (no bootstrap)
    truncated: A  # [T, N] bool: the episode was cut (bootstrap from the final observation)
    valid: A  # [T, N] bool: false on reset steps, which the losses mask out


ARRAY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(UnrollRecord) if f.name != "task")
"""The per-step arrays of every unroll record (everything but ``task``), in order."""

STEP_DTYPES: dict[str, np.dtype] = {
    "behaviour_logp": np.dtype(np.float32),
    "rewards": np.dtype(np.float32),
    "terminated": np.dtype(bool),
    "truncated": np.dtype(bool),
    "valid": np.dtype(bool),
}
"""The dtype of each ``[T, N]`` array of the record (``obs`` and ``actions`` take their
spaces' shapes and dtypes: :func:`mtrl.actors.unroll.unroll_fields`)."""
