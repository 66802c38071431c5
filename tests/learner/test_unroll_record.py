"""One unroll record: the actor's buffer, the replay's sequences and the learner's batch share
its fields, named and ordered alike, and each converts into the next by name."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.actors.unroll import UnrollBuffer, unroll_fields
from mtrl.learner.batch import TaskBatch, task_batch
from mtrl.learner.unroll_record import ARRAY_FIELDS, STEP_DTYPES, UnrollRecord
from mtrl.replay.storage import SequenceBatch

OBS = spaces.Dict(
    {"pos": spaces.Box(-1, 1, (3,), np.float32), "grid": spaces.Box(0, 1, (2, 2), np.float32)}
)


@pytest.mark.parametrize("record", [UnrollBuffer, SequenceBatch, TaskBatch])
def test_every_stage_extends_the_one_record(record: type) -> None:
    names = [f.name for f in fields(record)]
    base = [f.name for f in fields(UnrollRecord)]
    assert issubclass(record, UnrollRecord)
    assert names[: len(base)] == base == ["task", *ARRAY_FIELDS]


def test_allocation_follows_the_record() -> None:
    """``unroll_fields`` allocates every array of the record (a Dict observation nested by
    ``/``) with the record's dtypes, and a buffer over them converts to a batch by name."""
    T, N = 4, 3
    specs = unroll_fields(T, N, OBS, spaces.Discrete(5), state_size=2)
    assert {name.split("/")[0] for name in specs} == {*ARRAY_FIELDS, "versions", "core_state"}
    for name, dtype in STEP_DTYPES.items():
        assert specs[name] == ((T, N), dtype)
    buf = UnrollBuffer.allocate(7, T, N, OBS, spaces.Discrete(5), state_size=2)
    buf.rewards[:] = np.arange(T * N, dtype=np.float32).reshape(T, N)
    buf.obs["pos"][-1] = 0.5
    buf.versions[:] = [3, 4, 4, 5]
    batch = task_batch(buf, "cpu")
    assert (batch.task, batch.policy_version) == (7, 3)
    assert torch.equal(batch.rewards, torch.from_numpy(buf.rewards))
    assert batch.obs["pos"][-1].eq(0.5).all() and batch.obs["grid"].shape == (T + 1, N, 2, 2)
    assert batch.core_state is not None and batch.core_state.shape == (N, 2)
    assert task_batch(batch, "cpu").valid.dtype == torch.bool
