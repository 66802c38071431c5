"""One task's replay: a storage and the sampler over its items, kept in step."""

from __future__ import annotations

from typing import Any

import numpy as np

from mtrl.actors.unroll import UnrollBuffer
from mtrl.replay.samplers import Sampler
from mtrl.replay.storage import SequenceBatch, SequenceStorage, TransitionBatch, TransitionStorage


class TaskReplay:
    """``storage`` (transitions or sequences) with ``sampler`` addressing the same items.

    :meth:`add_unroll` writes an unroll and tells the sampler which items changed and which of
    them may be drawn, so the two never disagree about what is stored.
    """

    def __init__(self, storage: TransitionStorage | SequenceStorage, sampler: Sampler) -> None:
        if sampler.capacity != storage.capacity:
            raise ValueError(
                f"replay of task {storage.task}: the sampler addresses {sampler.capacity} "
                f"items, the storage holds {storage.capacity}; build it with storage.capacity"
            )
        self.storage = storage
        self.sampler = sampler

    def add_unroll(self, buf: UnrollBuffer) -> tuple[np.ndarray, np.ndarray]:
        """Copy ``buf`` in (the caller may reuse it at once); return the items written and
        which of them may be drawn (what the sampler was told)."""
        items, sampleable = self.storage.add_unroll(buf)
        self.sampler.add(items, sampleable)
        return items, sampleable

    def sample(
        self, batch_size: int, rng: np.random.Generator
    ) -> tuple[TransitionBatch | SequenceBatch, np.ndarray, np.ndarray]:
        """A batch of ``batch_size`` items, their indices (for :meth:`update_priorities`) and
        their importance weights."""
        indices, weights = self.sampler.sample(batch_size, rng)
        return self.storage.get(indices), indices, weights

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        self.sampler.update_priorities(indices, td_errors)

    def state_dict(self) -> dict[str, Any]:
        """Plain data (see :mod:`mtrl.replay.state`)."""
        return {"storage": self.storage.state_dict(), "sampler": self.sampler.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.storage.load_state_dict(state["storage"])
        self.sampler.load_state_dict(state["sampler"])
