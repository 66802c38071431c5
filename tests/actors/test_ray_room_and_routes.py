"""The Ray pool's parts that need no cluster: its warnings of tasks without a running actor
(:mod:`mtrl.actors.ray_room`, the live nodes stubbed) and its shard routes and unroll counts
(:mod:`mtrl.actors.ray_shard_routes`)."""

from __future__ import annotations

import numpy as np
import pytest

from mtrl.actors import ray_room
from mtrl.actors.ray_room import RoomWarnings
from mtrl.actors.ray_shard_routes import ShardRoutes, UnrollTally, holds_slot
from mtrl.actors.shard_insert import ShardedUnroll, ShardRoute
from mtrl.config.placement import TaskPlacement

ONE_CPU = [TaskPlacement(), TaskPlacement(), TaskPlacement()]


@pytest.fixture
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_room, "live_nodes", lambda: [{"CPU": 2.0, "memory": 8e9}])


@pytest.mark.usefixtures("two_cpus")
def test_the_start_names_a_task_without_room_once_and_the_later_check_keeps_quiet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    room = RoomWarnings(["a", "b", "c"], ONE_CPU, starved_warning_s=10.0)
    room.at_start([0, 1, 2], [1, 1, 1])
    assert room.said_at_start
    out = capsys.readouterr().out
    assert out.startswith("WARNING: task 'c' gets no actor: ") and out.count("WARNING") == 1
    assert room.due(100.0) and not room.due(100.5) and room.due(101.0)
    room.check_starved(100.0, [1, 1, 1], [1, 1, 0])
    assert capsys.readouterr().out == "", "said at the start: not again"
    reasons = room.reasons([1, 1, 1], [1, 1, 0])
    assert list(reasons) == [2] and reasons[2].startswith("no actor: the run's 3 actors ask")
    assert room.reasons([1, 1, 1], [1, 1, 0], local=[0, 0, 1]) == {}


@pytest.mark.usefixtures("two_cpus")
def test_a_task_with_a_local_actor_is_not_named_and_a_starved_one_is_named_after_the_wait(
    capsys: pytest.CaptureFixture[str],
) -> None:
    room = RoomWarnings(["a", "b", "c"], ONE_CPU, starved_warning_s=10.0)
    room.at_start([0, 1, 2], [1, 1, 1], local=[0, 0, 1])
    assert capsys.readouterr().out == ""
    room.check_starved(0.0, [1, 1, 1], [1, 0, 1])
    room.check_starved(11.0, [1, 1, 1], [1, 0, 1])
    out = capsys.readouterr().out
    assert out.startswith("WARNING: task 'b' has had no running actor for 11s"), out


def test_an_actor_gets_a_new_route_only_when_its_version_changed() -> None:
    routes = ShardRoutes(2)
    assert routes.current(0) == (None, None) and routes.newer(0, None) is None
    first = ShardRoute({"n1": []}, version=0)
    routes.set([first, None])
    assert routes.current(0) == (first, 0) and routes.newer(0, None) == (first, 0)
    assert routes.newer(0, 0) is None and routes.newer(1, None) is None
    again = ShardRoute({"n1": []}, version=1)
    routes.set([again, None])
    assert routes.newer(0, 0) == (again, 1)


def test_a_summary_holds_no_slot_and_the_tally_counts_summaries_and_array_bytes() -> None:
    summary = ShardedUnroll(
        task=0, length=4, num_envs=2, policy_version=0, num_samples=8, shard=0, ack=None, node="n"
    )
    data = {"obs": np.zeros((5, 2, 3), np.float32), "extra": {"a": np.zeros(4, np.int64)}}
    assert not holds_slot(summary) and holds_slot(data)
    tally = UnrollTally()
    tally.count(summary)
    tally.count(data)
    assert tally.metrics() == {"actors/summaries": 1.0, "actors/unroll_bytes": 120.0 + 32.0}
