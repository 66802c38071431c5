"""Rows of replay batches: joining the parts drawn from several shards and taking a subset.

A :class:`~mtrl.replay.storage.TransitionBatch` is batch-major (rows on axis 0); a
:class:`~mtrl.replay.storage.SequenceBatch` is time-major (rows on axis 1, except its
``core_state [n, S]``). Observations may be nested dicts of arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from mtrl.replay.storage import SequenceBatch, TransitionBatch

__all__ = ["concat_rows", "num_rows", "take_rows"]

B = TypeVar("B", TransitionBatch, SequenceBatch)


def _axis(batch: Any, name: str) -> int:
    return 1 if isinstance(batch, SequenceBatch) and name != "core_state" else 0


def _map(values: Sequence[Any], fn: Callable[[list[np.ndarray]], np.ndarray]) -> Any:
    """``fn`` over the arrays of ``values`` (nested dicts alike), leaf by leaf."""
    first = values[0]
    if isinstance(first, dict):
        return {k: _map([v[k] for v in values], fn) for k in first}
    if isinstance(first, np.ndarray):
        return fn(list(values))
    return first  # scalars (task, burn_in) and None are the same in every part


def concat_rows(parts: Sequence[B]) -> B:
    """One batch holding the rows of ``parts`` in order."""
    if len(parts) == 1:
        return parts[0]
    out = {}
    for f in dataclasses.fields(parts[0]):
        axis = _axis(parts[0], f.name)
        values = [getattr(p, f.name) for p in parts]
        out[f.name] = _map(values, lambda arrays, a=axis: np.concatenate(arrays, axis=a))
    return type(parts[0])(**out)


def take_rows(batch: B, rows: np.ndarray) -> B:
    """The rows ``rows`` of ``batch`` (copies)."""
    out = {}
    for f in dataclasses.fields(batch):
        axis = _axis(batch, f.name)
        out[f.name] = _map(
            [getattr(batch, f.name)], lambda arrays, a=axis: np.take(arrays[0], rows, axis=a)
        )
    return type(batch)(**out)


def num_rows(batch: TransitionBatch | SequenceBatch) -> int:
    """Rows in ``batch``."""
    return int(batch.rewards.shape[_axis(batch, "rewards")])
