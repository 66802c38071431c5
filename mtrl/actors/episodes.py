"""Episode bookkeeping for a batch env: returns, lengths and (where the env reports it) success
of finished episodes."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Finished(NamedTuple):
    """Episodes that ended since the last drain, listed by step, then env copy.

    ``successes`` has one flag per episode when the env reports success (an episode succeeds if
    any of its steps does), and is empty when it does not."""

    returns: list[float]
    lengths: list[int]
    successes: list[bool]


class EpisodeTracker:
    """Accumulates per-copy unscaled returns; reset steps (next-step rule) are not counted."""

    def __init__(self, num_envs: int) -> None:
        self._return = np.zeros(num_envs, np.float64)
        self._length = np.zeros(num_envs, np.int64)
        self._successes = np.zeros(num_envs, np.int64)  # successful steps in the running episode
        self.finished_returns: list[float] = []
        self.finished_lengths: list[int] = []
        self.finished_successes: list[bool] = []

    def record(
        self,
        rewards: np.ndarray,
        done: np.ndarray,
        valid: np.ndarray,
        success: np.ndarray | None = None,
    ) -> None:
        """Add a ``[T, N]`` unroll of raw rewards; ``valid`` false marks reset steps;
        ``success`` (``[T, N]`` bool, or None) the steps where the task's criterion held.

        Vectorised over the unroll (cumulative sums), with Python work only where an episode
        ends; episodes are listed by step, then env copy."""
        rv = np.where(valid, rewards, 0.0)
        cum_r = np.cumsum(rv, axis=0, dtype=np.float64)
        cum_l = np.cumsum(valid, axis=0, dtype=np.int64)
        cum_s = None if success is None else np.cumsum(success & valid, axis=0, dtype=np.int64)
        base_r = np.zeros(rewards.shape[1], np.float64)  # cumulative sum at the last episode end
        base_l = np.zeros(rewards.shape[1], np.int64)
        base_s = np.zeros(rewards.shape[1], np.int64)
        for t, n in np.argwhere(done):
            self.finished_returns.append(float(self._return[n] + cum_r[t, n] - base_r[n]))
            self.finished_lengths.append(int(self._length[n] + cum_l[t, n] - base_l[n]))
            self._return[n], self._length[n] = 0.0, 0
            base_r[n], base_l[n] = cum_r[t, n], cum_l[t, n]
            if cum_s is not None:
                self.finished_successes.append(bool(self._successes[n] + cum_s[t, n] - base_s[n]))
                self._successes[n], base_s[n] = 0, cum_s[t, n]
        self._return += cum_r[-1] - base_r
        self._length += cum_l[-1] - base_l
        if cum_s is not None:
            self._successes += cum_s[-1] - base_s

    def drain(self) -> Finished:
        """Finished episodes since the last drain."""
        out = Finished(self.finished_returns, self.finished_lengths, self.finished_successes)
        self.finished_returns, self.finished_lengths, self.finished_successes = [], [], []
        return out
