"""Which tasks a Ray cluster has no room for when a run starts its actors, and the words that
say so (:mod:`mtrl.actors.ray_placement`; no Ray needed)."""

from __future__ import annotations

from mtrl.actors.ray_placement import (
    StarveWatch,
    no_actor_reason,
    no_room_message,
    starved_message,
    unplaced_tasks,
)
from mtrl.config.placement import TaskPlacement

ONE_CPU = [TaskPlacement(), TaskPlacement(), TaskPlacement()]
TWO_CPUS = [{"CPU": 2.0, "memory": 8e9}]


def test_the_tasks_created_last_wait_when_the_actors_outnumber_the_cpus() -> None:
    """Three tasks of one actor on 2 CPUs: the third created gets none; with room for all,
    or with a second actor of a task that already has one waiting, nobody is left out."""
    assert unplaced_tasks([0, 1, 2], ONE_CPU, TWO_CPUS) == [2]
    assert unplaced_tasks([2, 0, 1], ONE_CPU, TWO_CPUS) == [1]
    assert unplaced_tasks([0, 1], ONE_CPU, TWO_CPUS) == []
    assert unplaced_tasks([0, 1, 0], ONE_CPU, TWO_CPUS) == []
    assert unplaced_tasks([0, 1, 2], ONE_CPU, [{"CPU": 2.0}, {"CPU": 1.0}]) == []
    pinned = [TaskPlacement(resources={"sim": 1}), TaskPlacement()]
    assert unplaced_tasks([0, 0, 1], pinned, [{"CPU": 4.0, "sim": 1.0}]) == []


def test_the_start_warning_names_the_task_the_cause_and_what_to_change() -> None:
    text = no_room_message(2, "c", ONE_CPU, [1, 1, 1], TWO_CPUS)
    assert text.startswith("task 'c' gets no actor: the run's 3 actors ask for 3 CPUs and the Ray")
    assert "has 2 on 1 node(s)" in text and "actors.ray.num_cpus" in text
    assert "0.66 per actor fits all 3" in text and "train fewer tasks" in text
    assert "scheduler.num_actors" not in text, "each task has its one actor: no help there"
    assert "lower scheduler.num_actors" in no_room_message(0, "a", ONE_CPU, [2, 1, 1], TWO_CPUS)
    # the later warning (starved_warning_s) gives the same cause
    late = starved_message(2, "c", 61.0, ONE_CPU, [1, 1, 1], TWO_CPUS)
    assert late.startswith("task 'c' has had no running actor for 61s")
    assert text.split(": ", 1)[1] in late


def test_the_final_tables_reason_is_short() -> None:
    reason = no_actor_reason(2, ONE_CPU, [1, 1, 1], TWO_CPUS)
    assert reason == "no actor: the run's 3 actors ask for 3 CPUs, the Ray cluster has 2"
    pinned = [TaskPlacement(resources={"sim": 1})]
    assert no_actor_reason(0, pinned, [1], TWO_CPUS) == "no actor: no live node has sim=1"


def test_a_task_without_a_running_actor_is_said_once_after_the_wait_and_again_after_one() -> None:
    watch = StarveWatch(after_s=15.0)
    assert watch.starved(0.0, [1, 0, 0], [1, 1, 0]) == []  # task 2 wants none
    assert watch.starved(14.0, [1, 0, 0], [1, 1, 0]) == []
    assert watch.starved(16.0, [1, 0, 0], [1, 1, 0]) == [1]
    assert watch.starved(40.0, [1, 0, 0], [1, 1, 0]) == [], "said once"
    assert watch.starved(41.0, [1, 1, 0], [1, 1, 0]) == []  # it had an actor
    assert watch.starved(42.0, [1, 0, 0], [1, 1, 0]) == []
    assert watch.starved(58.0, [1, 0, 0], [1, 1, 0]) == [1]
