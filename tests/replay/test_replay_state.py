"""Replay contents in checkpoints: plain data, ``weights_only`` loading, bit-for-bit restore."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from gymnasium import spaces
from replay_env import Collector

from mtrl.checkpoint import check_plain
from mtrl.replay import (
    PrioritizedSampler,
    SequenceStorage,
    TaskReplay,
    TransitionStorage,
    UniformSampler,
)


def through_a_file(state: dict) -> dict:
    check_plain(state)
    f = io.BytesIO()
    torch.save(state, f)
    f.seek(0)
    return torch.load(f, weights_only=True)


def make(kind: str, sampler: str, dict_obs: bool = False) -> tuple[TaskReplay, Collector]:
    T, B = 5, 3
    col = Collector(B, T, state_size=4 if kind == "sequences" else 0, dict_obs=dict_obs)
    env = col.actor.stepper.env
    o, a = env.single_observation_space, env.single_action_space
    if kind == "sequences":
        store = SequenceStorage(0, o, a, T, 8, state_size=4, burn_in=1)
    else:
        store = TransitionStorage(0, o, a, T, 40)
    make_sampler = PrioritizedSampler if sampler == "prioritized" else UniformSampler
    return TaskReplay(store, make_sampler(store.capacity)), col


def bits(replay: TaskReplay) -> dict[str, bytes]:
    out = {f"arrays/{n}": a.tobytes() for n, a in replay.storage.arrays.items()}
    if isinstance(replay.sampler, PrioritizedSampler):
        out["sum"] = replay.sampler.tree._sum.tobytes()
        out["min"] = replay.sampler.tree._min.tobytes()
    else:
        out["live"] = replay.sampler._live.tobytes()
    return out


@pytest.mark.parametrize(
    ("kind", "sampler", "unrolls", "dict_obs"),
    [
        ("transitions", "prioritized", 4, False),  # 12 of 8 segments: wrapped
        ("transitions", "uniform", 2, True),  # part filled, Dict observations
        ("sequences", "prioritized", 5, False),
    ],
)
def test_round_trip_is_bit_for_bit(kind: str, sampler: str, unrolls: int, dict_obs: bool) -> None:
    replay, col = make(kind, sampler, dict_obs)
    rng = np.random.default_rng(0)
    for _ in range(unrolls):
        replay.add_unroll(col.collect())
        _, idx, _ = replay.sample(16, rng)
        replay.update_priorities(idx, rng.normal(size=16))
    state = through_a_file(replay.state_dict())

    fresh, col2 = make(kind, sampler, dict_obs)
    for _ in range(3):  # old contents (a full ring) must not survive the load
        fresh.add_unroll(col2.collect())
    fresh.load_state_dict(state)
    assert bits(fresh) == bits(replay)
    for key in ("cursor", "size", "segments_added"):
        assert getattr(fresh.storage, key) == getattr(replay.storage, key)
    assert fresh.sampler.count == replay.sampler.count
    # the restored replay goes on exactly as the original does
    buf = col.collect()
    for r in (replay, fresh):
        r.add_unroll(buf)
    a, ia, wa = replay.sample(64, np.random.default_rng(9))
    b, ib, wb = fresh.sample(64, np.random.default_rng(9))
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(wa, wb)
    np.testing.assert_array_equal(a.actions, b.actions)


def test_mismatched_replay_is_refused_by_name() -> None:
    replay, col = make("transitions", "prioritized")
    replay.add_unroll(col.collect())
    state = through_a_file(replay.state_dict())
    box, act = spaces.Box(-1e9, 1e9, (5,), np.float32), spaces.Discrete(3)
    other = TransitionStorage(0, box, act, 5, 40)
    with pytest.raises(ValueError, match=r"\['obs'\].*float32\[3, 6, 4\].*float32\[3, 6, 5\]"):
        other.load_state_dict(state["storage"])
    small = TransitionStorage(0, col.actor.stepper.env.single_observation_space, act, 5, 20)
    with pytest.raises(ValueError, match="num_segments = 8, this replay has 4"):
        small.load_state_dict(state["storage"])
    with pytest.raises(ValueError, match=r"alpha = 0\.6, this replay has 0\.7"):
        PrioritizedSampler(40, alpha=0.7).load_state_dict(state["sampler"])
    with pytest.raises(ValueError, match="kind = 'prioritized'"):
        UniformSampler(40).load_state_dict(state["sampler"])
