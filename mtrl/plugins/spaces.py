"""Space helpers: deterministic batched random actions, batch-shape checks."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


def random_actions(space: gym.Space, n: int, rng: np.random.Generator) -> Any:
    """``n`` uniformly random actions from ``space`` as one batch, drawn from ``rng``.

    Unlike ``space.sample()`` this is reproducible from ``rng`` alone and batched. Unbounded
    Box dimensions are drawn from [-1, 1].
    """
    if isinstance(space, spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, size=n).astype(space.dtype)
    if isinstance(space, spaces.Box):
        low = np.where(np.isfinite(space.low), space.low, -1.0)
        high = np.where(np.isfinite(space.high), space.high, 1.0)
        draw = rng.uniform(low, high, size=(n, *space.shape))
        if np.issubdtype(space.dtype, np.integer):
            draw = np.floor(draw)
        return draw.astype(space.dtype)
    if isinstance(space, spaces.MultiDiscrete):
        return (rng.integers(0, space.nvec, size=(n, *space.shape)) + space.start).astype(
            space.dtype
        )
    if isinstance(space, spaces.MultiBinary):
        return rng.integers(0, 2, size=(n, *space.shape)).astype(space.dtype)
    if isinstance(space, spaces.Dict):
        return {k: random_actions(s, n, rng) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(random_actions(s, n, rng) for s in space.spaces)
    raise TypeError(f"no random actions for space {space}")


def batch_item(batch: Any, i: int) -> Any:
    """Element ``i`` of a batched observation (array, dict or tuple of arrays)."""
    if isinstance(batch, dict):
        return {k: batch_item(v, i) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(batch_item(v, i) for v in batch)
    return np.asarray(batch[i])


def batch_len(batch: Any) -> int:
    """Leading dimension of a batched observation."""
    if isinstance(batch, dict):
        return batch_len(next(iter(batch.values())))
    if isinstance(batch, tuple):
        return batch_len(batch[0])
    return len(batch)


def write_item(batch: Any, i: int, value: Any) -> None:
    """``batch[i] = value`` for array or (nested) dict batches (copies into a preallocated row).

    A tuple ``value`` (a Tuple observation) goes into a dict batch keyed ``"0"``, ``"1"``, ...,
    the form unrolls carry Tuple observations in.
    """
    if isinstance(batch, dict):
        for k, b in batch.items():
            write_item(b, i, value[int(k)] if isinstance(value, tuple | list) else value[k])
    else:
        batch[i] = value


def copy_batch(batch: Any) -> Any:
    """A copy of an array, dict or tuple batch, so a caller may keep it while the source is
    reused."""
    if isinstance(batch, dict):
        return {k: copy_batch(b) for k, b in batch.items()}
    if isinstance(batch, tuple):
        return tuple(copy_batch(b) for b in batch)
    return batch.copy()
