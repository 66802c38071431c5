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
    returns, lengths, successes = tracker.drain()
    assert successes == [], "no success flags given, none reported"
    want_r, want_l = _reference(rewards, done)
    assert lengths == want_l
    np.testing.assert_allclose(returns, want_r, rtol=1e-12, atol=1e-9)
    assert tracker.drain() == ([], [], [])
    if p_done == 0.0:
        assert returns == []


def _reference_success(success: np.ndarray, done: np.ndarray) -> list[bool]:
    """Step by step: an episode succeeds if any of its genuine (non-reset) steps does."""
    n = success.shape[1]
    any_, prev, out = np.zeros(n, bool), np.zeros(n, bool), []
    for t in range(len(success)):
        for i in range(n):
            if not prev[i]:
                any_[i] |= success[t, i]
            if done[t, i]:
                out.append(bool(any_[i]))
                any_[i] = False
        prev = done[t]
    return out


@pytest.mark.parametrize("p_success", [0.0, 0.02, 0.3])
def test_an_episode_succeeds_if_any_of_its_steps_does_across_unrolls(p_success: float) -> None:
    rng = np.random.default_rng(7 + int(p_success * 100))
    T, N, unrolls = 6, 4, 8
    rewards = np.zeros((T * unrolls, N), np.float32)
    done = rng.random((T * unrolls, N)) < 0.1
    success = rng.random((T * unrolls, N)) < p_success
    success[1:][done[:-1]] = True  # reset steps claim success: they must not count
    tracker, prev = EpisodeTracker(N), np.zeros(N, bool)
    for u in range(unrolls):
        sl = slice(u * T, (u + 1) * T)
        valid = ~np.concatenate([prev[None], done[sl][:-1]])
        tracker.record(rewards[sl], done[sl], valid, success[sl])
        prev = done[sl][-1]
    returns, _, successes = tracker.drain()
    assert len(successes) == len(returns) == int(done.sum())
    assert successes == _reference_success(success, done)
    if p_success == 0.0:
        assert not any(successes)
