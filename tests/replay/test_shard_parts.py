"""The pure parts of sharded replay, without Ray: the split of a batch over shards (the draws
across shards follow the global priorities: a chi-square test on many draws), the global
importance weights, the index code, joining and subsetting batches, and the rate limiter's
ratio."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from scipy import stats

from mtrl.actors.unroll import UnrollBuffer
from mtrl.config.replay import ReplayConfig
from mtrl.replay import PrioritizedSampler, SequenceStorage, TransitionStorage
from mtrl.replay.batch_rows import concat_rows, num_rows, take_rows
from mtrl.replay.rate_limiter import RateLimiter
from mtrl.replay.shard import ReplayShard
from mtrl.replay.shard_math import decode, encode, importance_weights, split_by_mass

OBS = spaces.Box(-1e9, 1e9, (3,), np.float32)
ACT = spaces.Discrete(4)
T, N = 5, 4


def unroll(task: int, value: float) -> UnrollBuffer:
    """An unroll whose steps are all valid transitions; observation rows hold ``value``."""
    buf = UnrollBuffer.allocate(task, T, N, OBS, ACT)
    buf.obs[:] = value
    buf.rewards[:] = value
    buf.valid[:] = True
    return buf


def filled_shards(k: int, replay: ReplayConfig) -> list[ReplayShard]:
    """``k`` shards of task 0, two unrolls each (40 items per shard)."""
    template = TransitionStorage(0, OBS, ACT, T, 2 * T * N).empty_like(1)
    shards = []
    for s in range(k):
        shard = ReplayShard(replay)
        shard.open(0, template, 2 * N)
        shard.add(unroll(0, s))
        shard.add(unroll(0, s + 0.5))
        shards.append(shard)
    return shards


def test_draws_across_shards_follow_the_global_priorities() -> None:
    """Priorities set item by item over 3 shards; 300k rows drawn as the front draws them (split
    by shard mass, each shard proportional within) land on each item as ``p^alpha / sum``."""
    replay = ReplayConfig(sampler="prioritized", priority_alpha=0.7)
    shards = filled_shards(3, replay)
    rng = np.random.default_rng(7)
    per_shard = shards[0].replays[0].storage.capacity
    td = [rng.gamma(0.5, 2.0, per_shard) for _ in shards]
    td[2] *= 5.0  # one shard far heavier than the others
    for shard, errors in zip(shards, td, strict=True):
        shard.update_priorities(0, np.arange(per_shard), errors)
    expected = np.concatenate([(np.abs(e) + 1e-6) ** 0.7 for e in td])
    expected /= expected.sum()
    hits = np.zeros(3 * per_shard)
    for _ in range(300):
        masses = np.array([s.stats(0).total for s in shards])
        counts = split_by_mass(masses, 1000, rng)
        for i, (shard, c) in enumerate(zip(shards, counts, strict=True)):
            if c:
                _, local, _, _ = shard.sample(0, int(c), int(rng.integers(2**63)))
                np.add.at(hits, encode(i, local, per_shard), 1)
    assert hits.sum() == 300_000
    chi2 = stats.chisquare(hits, expected * hits.sum())
    assert chi2.pvalue > 1e-3, chi2
    # and a wrong distribution (each shard alike, as if drawn by count) is told apart
    by_count = np.concatenate([e / e.sum() / 3 for e in np.split(expected, 3)])
    assert stats.chisquare(hits, by_count * hits.sum()).pvalue < 1e-6


def test_global_weights_are_the_unsharded_samplers() -> None:
    """The importance weights from the shards' masses and the global smallest mass equal a
    single prioritized sampler's over the same priorities."""
    rng = np.random.default_rng(3)
    td = rng.gamma(0.5, 2.0, 40)
    single = PrioritizedSampler(40, alpha=0.6, beta=0.5)
    single.add(np.arange(40))
    single.update_priorities(np.arange(40), td)
    idx, w = single.sample(64, rng)
    masses = single.tree.get(idx)
    np.testing.assert_allclose(importance_weights(masses, single.tree.min, 0.5), w, rtol=1e-6)


def test_split_and_index_code() -> None:
    rng = np.random.default_rng(0)
    counts = split_by_mass(np.array([0.0, 1.0, 3.0]), 10_000, rng)
    assert counts.sum() == 10_000 and counts[0] == 0
    assert abs(counts[2] / 10_000 - 0.75) < 0.02
    with pytest.raises(ValueError, match="no shard holds"):
        split_by_mass(np.zeros(2), 5, rng)
    g = encode(np.array([0, 2, 1]), np.array([5, 0, 39]), 40)
    np.testing.assert_array_equal(g, [5, 80, 79])
    shard, local = decode(g, 40)
    np.testing.assert_array_equal(shard, [0, 2, 1])
    np.testing.assert_array_equal(local, [5, 0, 39])


def test_batches_join_and_subset_transitions_and_sequences() -> None:
    shards = filled_shards(2, ReplayConfig())
    a, _, _, _ = shards[0].sample(0, 3, 1)
    b, _, _, _ = shards[1].sample(0, 2, 1)
    joined = concat_rows([a, b])
    assert num_rows(joined) == 5
    np.testing.assert_array_equal(joined.rewards[3:], b.rewards)
    sub = take_rows(joined, np.array([4, 0]))
    np.testing.assert_array_equal(sub.obs, joined.obs[[4, 0]])
    seq = SequenceStorage(0, OBS, ACT, T, 8)
    seq.add_unroll(unroll(0, 2.0))
    s1, s2 = seq.get(np.array([0, 1])), seq.get(np.array([3]))
    joined = concat_rows([s1, s2])
    assert num_rows(joined) == 3 and joined.obs.shape == (T + 1, 3, 3)
    assert take_rows(joined, np.array([2])).rewards.shape == (T, 1)


def test_an_empty_like_storage_has_the_fields_and_fewer_segments() -> None:
    big = TransitionStorage(0, OBS, ACT, T, 1000)
    small = big.empty_like(3)
    assert small.capacity == 3 * T and small.fields == big.fields
    assert small.arrays["obs"].shape == (3, T + 1, 3) and small.size == 0


def simulate(limiter: RateLimiter, insert_every: int, sample_every: int, ticks: int) -> None:
    """An inserter (one item per ``insert_every`` ticks) and a sampler (a batch of 8 per
    ``sample_every`` ticks), each skipping its turn when the limiter says wait."""
    for tick in range(ticks):
        if tick % insert_every == 0 and limiter.can_insert(1):
            limiter.inserted(1)
        if tick % sample_every == 0 and limiter.can_sample(8):
            limiter.sampled(8)


@pytest.mark.parametrize(("insert_every", "sample_every"), [(1, 50), (20, 1), (3, 3)])
def test_the_limiter_holds_its_ratio_within_ten_percent(
    insert_every: int, sample_every: int
) -> None:
    """Whichever side is faster (actors far ahead, learner far ahead, or about even), the
    ratio of draws to inserts ends within 10 % of samples_per_insert."""
    limiter = RateLimiter(samples_per_insert=4.0, min_size_to_sample=100, error_buffer=200.0)
    simulate(limiter, insert_every, sample_every, 400_000)
    assert limiter.inserts > 1000
    assert abs(limiter.ratio - 4.0) / 4.0 < 0.10, (limiter.inserts, limiter.samples)


def test_the_limiter_waits_for_min_size_and_refuses_bad_settings() -> None:
    limiter = RateLimiter(2.0, min_size_to_sample=10, error_buffer=5.0)
    assert not limiter.can_sample(1)
    limiter.inserted(10)
    # samples stay within error_buffer of spi * (inserts - min_size): 0 + 5 now
    assert limiter.can_sample(5) and not limiter.can_sample(6)
    limiter.inserted(3)
    assert limiter.can_sample(11) and not limiter.can_sample(12)
    with pytest.raises(ValueError, match="samples_per_insert > 0"):
        RateLimiter(0.0)
