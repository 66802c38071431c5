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

    def record(self, rewards: np.ndarray, done: np.ndarray, valid: np.ndarray) -> None:
        """Add a ``[T, N]`` unroll of raw rewards; ``valid`` false marks reset steps.

        Vectorised over the unroll (cumulative sums), with Python work only where an episode
        ends; episodes are listed by step, then env copy."""
        rv = np.where(valid, rewards, 0.0)
        cum_r = np.cumsum(rv, axis=0, dtype=np.float64)
        cum_l = np.cumsum(valid, axis=0, dtype=np.int64)
        base_r = np.zeros(rewards.shape[1], np.float64)  # cumulative sum at the last episode end
        base_l = np.zeros(rewards.shape[1], np.int64)
        for t, n in np.argwhere(done):
            self.finished_returns.append(float(self._return[n] + cum_r[t, n] - base_r[n]))
            self.finished_lengths.append(int(self._length[n] + cum_l[t, n] - base_l[n]))
            self._return[n], self._length[n] = 0.0, 0
            base_r[n], base_l[n] = cum_r[t, n], cum_l[t, n]
        self._return += cum_r[-1] - base_r
        self._length += cum_l[-1] - base_l

    def drain(self) -> tuple[list[float], list[int]]:
        """Finished episodes since the last drain."""
        out = self.finished_returns, self.finished_lengths
        self.finished_returns, self.finished_lengths = [], []
        return out
