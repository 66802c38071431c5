"""The liveness rules as pure functions: when no more unrolls can come, what is said about a
short batch, when a stall is reported and what the report names."""

from __future__ import annotations

from mtrl.actors.occupancy import ActorOccupancy
from mtrl.train.liveness import StallWatch, no_more_unrolls, short_batch_message, stall_report

NAMES = ["cartpole", "heat", "pong"]


def occ(actor: int, task: int, started: bool, held: int, slots: int = 2, cols: int = 4):
    return ActorOccupancy(actor, task, started, held, slots, cols)


def test_no_more_unrolls_only_when_every_started_actor_is_full() -> None:
    assert not no_more_unrolls([]), "no actor at all: one may still start"
    assert not no_more_unrolls([occ(0, 0, False, 0)]), "starting actors will bring unrolls"
    assert no_more_unrolls([occ(0, 0, True, 2), occ(1, 1, True, 2)])
    assert not no_more_unrolls([occ(0, 0, True, 2), occ(1, 1, True, 1)]), "one still steps"
    # An actor that never gets a node must not stop the others' updates.
    assert no_more_unrolls([occ(0, 0, True, 2), occ(1, 1, False, 0)])


def test_short_batch_message_names_the_fields_and_the_largest_batch_that_fills() -> None:
    running = [occ(0, 0, True, 2), occ(1, 0, True, 2), occ(2, 2, True, 2, slots=1, cols=3)]
    text = short_batch_message(32, 32, running, NAMES)
    assert text is not None
    assert "asks for 32 env columns, but the actors can hold at most 19 at once" in text
    assert "cartpole: 2 actors × 2 slots × 4 envs; pong: 1 actor × 1 slots × 3 envs" in text
    assert "learner.batch_size to 19 or less" in text
    # Anakin tasks bring 8 of the 32 columns: the actors need 24, so 19 + 8 = 27 fills.
    assert "learner.batch_size to 27 or less" in (short_batch_message(32, 24, running, NAMES) or "")
    # Enough capacity: a short update was a moment of start-up, not a config to change.
    assert short_batch_message(16, 16, running, NAMES) is None


def test_a_stall_is_reported_after_the_floor_and_twenty_unrolls_then_at_doubling_times() -> None:
    w = StallWatch(floor_s=60, now=0.0)
    assert w.due(59.0) is None and w.due(60.0) == 60.0
    assert w.due(100.0) is None and w.due(120.0) == 120.0 and w.due(239.0) is None
    w.updated(1000.0)
    w.unroll(10.0)  # a slow simulation: 20 unrolls' time before a word
    assert w.due(1199.0) is None and w.due(1200.0) == 200.0
    assert StallWatch(floor_s=0, now=0.0).due(1e9) is None, "0 turns it off"


def test_the_stall_report_says_what_each_task_is_doing() -> None:
    running = [occ(0, 0, True, 2), occ(1, 0, True, 1), occ(2, 1, False, 0)]
    text = stall_report(
        75.0, 0.4, 32, {0: 12}, running, [2, 3, 0], {2: "6 of 6 attempts failed"}, NAMES, [0, 1, 2]
    )
    lines = text.splitlines()
    assert lines[0] == (
        "no learner update for 75 s (the slowest recent unroll took 0.40 s): the learner waits "
        "for 32 env columns and has 12 (cartpole 12)"
    )
    assert lines[1] == (
        "  cartpole: 1 stepping; 1 waiting for a free slot (all its unrolls are with the learner)"
    )
    assert lines[2] == (
        "  heat: 1 starting (building its envs or waiting for a node); 2 restarting after a fault"
    )
    assert lines[3] == "  pong: quarantined (6 of 6 attempts failed)"
    alone = stall_report(61.0, None, 8, {}, [], [0], {}, NAMES, [0])
    assert "no unroll has arrived yet" in alone and alone.endswith("cartpole: no actor allotted")
