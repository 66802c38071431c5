"""When a Ray actor's unroll counts as hung: past its usual wall by more than step_timeout_s."""

from __future__ import annotations

from mtrl.actors.ray_faults import overdue_unroll


def test_an_unroll_within_its_usual_time_and_the_timeout_is_not_overdue() -> None:
    walls = [1.0, 2.0, 3.0]  # median 2 s
    assert overdue_unroll(2.0 + 30.0, walls, step_timeout_s=30.0) is None


def test_an_unroll_past_its_usual_time_by_more_than_the_timeout_is_a_hang() -> None:
    text = overdue_unroll(32.5, [1.0, 2.0, 3.0], step_timeout_s=30.0)
    assert text is not None
    assert "ran 32s" in text and "its usual 2.0s" in text and "step_timeout_s=30" in text


def test_before_any_unroll_finished_the_timeout_alone_bounds_it() -> None:
    assert overdue_unroll(29.0, [], step_timeout_s=30.0) is None
    text = overdue_unroll(31.0, [], step_timeout_s=30.0)
    assert text is not None and "no unroll finished before" in text
