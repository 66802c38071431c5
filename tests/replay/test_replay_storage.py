"""Replay storage fed by real unrolls: ring wrap, next observations at episode ends and across
the wrap, Dict observations, sequences with stored states and burn-in, sizes before allocating."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from gymnasium import spaces
from replay_env import Collector, ends_terminated, episode_length, flat_obs

from mtrl.actors.unroll import UnrollBuffer
from mtrl.replay import SequenceStorage, TransitionStorage


def check_transitions(batch, items_valid: np.ndarray) -> dict[str, int]:
    """Assert every sampleable transition is one true step of the counter env; count the
    episode ends seen (by kind)."""
    obs, nxt = flat_obs(batch.obs)[items_valid], flat_obs(batch.next_obs)[items_valid]
    copy_, ep, step = obs[:, 0], obs[:, 1], obs[:, 2]
    np.testing.assert_array_equal(nxt[:, :2], obs[:, :2])  # same copy, same episode
    np.testing.assert_array_equal(nxt[:, 2], step + 1)
    np.testing.assert_array_equal(nxt[:, 3], batch.actions[items_valid])
    np.testing.assert_array_equal(batch.rewards[items_valid], 1000 * copy_ + 10 * ep + step)
    end = nxt[:, 2] == episode_length(copy_, ep)
    term = end & ends_terminated(copy_, ep)
    np.testing.assert_array_equal(batch.terminated[items_valid], term)
    np.testing.assert_array_equal(batch.truncated[items_valid], end & ~term)
    return {"terminated": int(term.sum()), "truncated": int((end & ~term).sum())}


def check_reset_steps(batch, sampleable: np.ndarray) -> None:
    """The unsampleable steps are exactly the reset steps: from a final observation to the
    next episode's first one."""
    obs, nxt = flat_obs(batch.obs), flat_obs(batch.next_obs)
    reset = nxt[:, 2] == 0
    np.testing.assert_array_equal(~sampleable, reset)
    np.testing.assert_array_equal(obs[reset, 2], episode_length(obs[reset, 0], obs[reset, 1]))
    np.testing.assert_array_equal(batch.rewards[reset], 0)


@pytest.mark.parametrize("dict_obs", [False, True])
def test_transitions_across_wraps_and_episode_ends(dict_obs: bool) -> None:
    T, B, segments = 5, 3, 7  # 7 segments: writes of 3 split at the wrap
    col = Collector(B, T, dict_obs=dict_obs)
    env = col.actor.stepper.env
    store = TransitionStorage(0, env.single_observation_space, env.single_action_space, T, 33)
    assert store.num_segments == segments and store.capacity == 35
    history: list[UnrollBuffer] = []
    ends = {"terminated": 0, "truncated": 0, "at_last_step": 0, "reset_at_first_step": 0}
    for u in range(12):
        buf = col.collect()
        history.append(copy.deepcopy(buf))
        items, sampleable = store.add_unroll(buf)
        slots = np.arange(u * B, (u + 1) * B) % segments
        np.testing.assert_array_equal(items, (slots[:, None] * T + np.arange(T)).ravel())
        np.testing.assert_array_equal(sampleable, buf.valid.T.ravel())
        done = buf.terminated | buf.truncated
        ends["at_last_step"] += int(done[-1].sum())
        ends["reset_at_first_step"] += int((~buf.valid[0]).sum())
        # every stored transition, also those written before the wrap
        all_items = np.arange(store.size * T)
        batch = store.get(all_items)
        valid = store.arrays["valid"][: store.size].ravel()
        for kind, n in check_transitions(batch, valid).items():
            ends[kind] += n if u == 11 else 0
        check_reset_steps(batch, valid)
        # the ring holds the newest `segments` env columns, each at slot (global index % S)
        assert store.size == min((u + 1) * B, segments)
        for g in range(max(0, (u + 1) * B - segments), (u + 1) * B):
            src, b, slot = history[g // B], g % B, g % segments
            got = store.get(slot * T + np.arange(T))
            np.testing.assert_array_equal(flat_obs(got.obs), flat_obs(src.obs)[:T, b])
            np.testing.assert_array_equal(flat_obs(got.next_obs), flat_obs(src.obs)[1:, b])
            np.testing.assert_array_equal(got.actions, src.actions[:, b])
            np.testing.assert_array_equal(got.behaviour_logp, src.behaviour_logp[:, b])
            np.testing.assert_array_equal(got.versions, src.versions)
    # the run met every case the layout must get right
    assert all(v > 0 for v in ends.values()), ends


def test_truncated_step_keeps_the_final_observation() -> None:
    """A truncated step's next observation is the episode's last one (to bootstrap from), not
    the reset observation that the following step returns."""
    T = 6
    col = Collector(1, T)  # copy 0: episode 1 lasts 3 steps and is truncated
    env = col.actor.stepper.env
    store = TransitionStorage(0, env.single_observation_space, env.single_action_space, T, T)
    store.add_unroll(col.collect())
    b = store.get(np.arange(T))
    # episode 0: 2 steps, terminated; step 2 resets; episode 1: steps 3..5, truncated at 5
    np.testing.assert_array_equal(b.terminated, [0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(b.truncated, [0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(b.next_obs[5], [0, 1, 3, b.actions[5]])
    np.testing.assert_array_equal(b.next_obs[1], [0, 0, 2, b.actions[1]])
    np.testing.assert_array_equal(b.next_obs[2], [0, 1, 0, -1])  # the reset step


def test_sequences_with_stored_states_and_burn_in() -> None:
    T, B, S = 6, 4, 2
    col = Collector(B, T, state_size=S)
    env = col.actor.stepper.env
    store = SequenceStorage(
        0, env.single_observation_space, env.single_action_space, T, 10, state_size=S, burn_in=2
    )
    history = []
    for u in range(7):  # 28 sequences through 10 slots
        buf = col.collect()
        history.append(copy.deepcopy(buf))
        items, sampleable = store.add_unroll(buf)
        np.testing.assert_array_equal(items, np.arange(u * B, (u + 1) * B) % 10)
        np.testing.assert_array_equal(sampleable, buf.valid[2:].any(axis=0))
    newest = range(28 - 10, 28)
    slots = np.array([g % 10 for g in newest])
    seq = store.get(slots)
    for k, g in enumerate(newest):
        src, b = history[g // B], g % B
        np.testing.assert_array_equal(seq.obs[:, k], src.obs[:, b])
        np.testing.assert_array_equal(seq.actions[:, k], src.actions[:, b])
        np.testing.assert_array_equal(seq.rewards[:, k], src.rewards[:, b])
        np.testing.assert_array_equal(seq.valid[:, k], src.valid[:, b])
        np.testing.assert_array_equal(seq.terminated[:, k], src.terminated[:, b])
        np.testing.assert_array_equal(seq.truncated[:, k], src.truncated[:, b])
        np.testing.assert_array_equal(seq.versions[:, k], src.versions)
        # the state stored with the sequence is the one the actor had before its row 0
        np.testing.assert_array_equal(seq.core_state[k], [g // B, b])
    assert seq.obs.shape == (T + 1, 10, 4) and seq.obs.flags.c_contiguous
    np.testing.assert_array_equal(seq.loss_mask[:2], False)
    np.testing.assert_array_equal(seq.loss_mask[2:], seq.valid[2:])
    assert not seq.valid[:2].all()  # burn-in rows keep their own reset marks
    assert seq.policy_version == min(g // B for g in newest)


def test_sequence_with_nothing_past_burn_in_is_not_sampleable() -> None:
    box, act = spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(2)
    buf = UnrollBuffer.allocate(0, 4, 3, box, act, state_size=1)
    buf.valid[:] = True
    buf.valid[2:, 1] = False  # copy 1: only its burn-in steps are genuine
    store = SequenceStorage(0, box, act, 4, 5, state_size=1, burn_in=2)
    _, sampleable = store.add_unroll(buf)
    np.testing.assert_array_equal(sampleable, [True, False, True])


def test_bad_unrolls_are_refused_by_name() -> None:
    box, act = spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(2)
    store = TransitionStorage(3, box, act, 4, 8)
    with pytest.raises(ValueError, match="task 3 was given an unroll of task 0"):
        store.add_unroll(UnrollBuffer.allocate(0, 4, 1, box, act))
    with pytest.raises(ValueError, match="unrolls of 4 steps, got one of 5"):
        store.add_unroll(UnrollBuffer.allocate(3, 5, 1, box, act))
    with pytest.raises(ValueError, match="fewer than the 3 env copies"):
        store.add_unroll(UnrollBuffer.allocate(3, 4, 3, box, act))
    seqs = SequenceStorage(3, box, act, 4, 8, state_size=2)
    with pytest.raises(ValueError, match="carries none"):
        seqs.add_unroll(UnrollBuffer.allocate(3, 4, 1, box, act))
    with pytest.raises(ValueError, match="burn_in"):
        SequenceStorage(3, box, act, 4, 8, burn_in=4)


@pytest.mark.parametrize(
    "obs_space",
    [
        spaces.Box(0, 255, (84, 84, 4), np.uint8),
        spaces.Dict({"a": spaces.Box(-1, 1, (3,)), "b": spaces.Discrete(5)}),
        spaces.Tuple((spaces.Box(-1, 1, (2, 2), np.float64), spaces.MultiBinary(3))),
    ],
)
def test_nbytes_before_allocating_is_what_is_allocated(obs_space: spaces.Space) -> None:
    act = spaces.Box(-1, 1, (2,), np.float32)
    need = TransitionStorage.nbytes(101, 20, obs_space, act)
    assert need == TransitionStorage(0, obs_space, act, 20, 101).allocated_nbytes
    need = SequenceStorage.nbytes(7, 20, obs_space, act, state_size=16)
    assert need == SequenceStorage(0, obs_space, act, 20, 7, state_size=16).allocated_nbytes
    # one observation per step plus one per segment: 21 of 84x84x4 bytes per 20 steps
    if obs_space.shape == (84, 84, 4):
        per_step = 84 * 84 * 4 * 21 / 20 + 8 + 4 + 4 + 3 + 8  # action, logp, reward, flags, ver
        assert TransitionStorage.nbytes(1000, 20, obs_space, act) == pytest.approx(1000 * per_step)
