"""Episode bookkeeping for a batch env: returns and lengths of finished episodes."""

from __future__ import annotations

import numpy as np


class EpisodeTracker:
    """Accumulates per-copy unscaled returns; reset steps (next-step rule) are not counted."""

    def __init__(self, num_envs: int) -> None:
        self._return = np.zeros(num_envs, np.float64)
        self._length = np.zeros(num_envs, np.int64)
        self.finished_returns: list[float] = []
        self.finished_lengths: list[int] = []

    def record(self, reward: np.ndarray, done: np.ndarray, valid: np.ndarray) -> None:
        """Add one step's raw rewards; ``valid`` false marks reset steps."""
        self._return += np.where(valid, reward, 0.0)
        self._length += valid
        if done.any():
            idx = np.flatnonzero(done)
            self.finished_returns.extend(self._return[idx].tolist())
            self.finished_lengths.extend(self._length[idx].tolist())
            self._return[idx] = 0.0
            self._length[idx] = 0

    def drain(self) -> tuple[list[float], list[int]]:
        """Finished episodes since the last drain."""
        out = self.finished_returns, self.finished_lengths
        self.finished_returns, self.finished_lengths = [], []
        return out
