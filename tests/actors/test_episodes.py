"""Episode accounting over whole unrolls equals step-by-step accounting."""

from __future__ import annotations

import numpy as np
import pytest

from mtrl.actors.episodes import EpisodeTracker


def _reference(rewards: np.ndarray, done: np.ndarray) -> tuple[list[float], list[int]]:
    """Step by step over the concatenated unrolls: a step after a done is a reset step."""
    n = rewards.shape[1]
    ret, length, prev = np.zeros(n), np.zeros(n, int), np.zeros(n, bool)
    returns, lengths = [], []
    for t in range(len(rewards)):
        for i in range(n):
            if not prev[i]:
                ret[i] += float(rewards[t, i])
                length[i] += 1
            if done[t, i]:
                returns.append(ret[i])
                lengths.append(int(length[i]))
                ret[i], length[i] = 0.0, 0
        prev = done[t]
    return returns, lengths


@pytest.mark.parametrize("p_done", [0.0, 0.05, 0.5])
def test_unroll_accounting_equals_step_by_step(p_done: float) -> None:
    rng = np.random.default_rng(int(p_done * 100))
    T, N, unrolls = 7, 5, 6
    rewards = rng.normal(size=(T * unrolls, N)).astype(np.float32)
    done = rng.random((T * unrolls, N)) < p_done
    tracker, prev = EpisodeTracker(N), np.zeros(N, bool)
    for u in range(unrolls):
        r, d = rewards[u * T : (u + 1) * T], done[u * T : (u + 1) * T]
        valid = ~np.concatenate([prev[None], d[:-1]])
        tracker.record(r, d, valid)
        prev = d[-1]
    returns, lengths = tracker.drain()
    want_r, want_l = _reference(rewards, done)
    assert lengths == want_l
    np.testing.assert_allclose(returns, want_r, rtol=1e-12, atol=1e-9)
    assert tracker.drain() == ([], [])
    if p_done == 0.0:
        assert returns == []
