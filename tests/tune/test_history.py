"""A population's history (``mtrl.tune.history``) and its report (``mtrl.tune.report``),
from the files alone: no Ray."""

from __future__ import annotations

import json
from pathlib import Path

from mtrl.tune.history import (
    HISTORY_FILE,
    Interval,
    is_population,
    member_label,
    read_origin,
    read_population,
    record_interval,
    write_origin,
)
from mtrl.tune.report import FIGURE, member_table, write_population_figure

TRIAL = "train_member_ab123_{i:05d}_{i}_learner_learning_rate=0.001_2026-11-26_15-06-52"


def _population(root: Path) -> Path:
    """Two members: member 1 copies member 0 after the first interval."""
    exp = root / "pbt"
    lr = "learner.learning_rate"
    runs = []
    for i in range(2):
        run = exp / TRIAL.format(i=i) / "run" / f"pbt__0__2026112{i}"
        run.mkdir(parents=True)
        runs.append(run)
    record_interval(runs[0], Interval(2000, 20.0, {lr: 1e-3}, started=True))
    record_interval(runs[0], Interval(4000, 30.0, {lr: 1e-3}))
    record_interval(runs[1], Interval(2000, 10.0, {lr: 1e-4}, started=True))
    record_interval(runs[1], Interval(4000, 25.0, {lr: 1.2e-3}, TRIAL.format(i=0), True))
    with (runs[1] / HISTORY_FILE).open("a") as f:
        f.write('{"env_steps": 60')  # a member killed while writing
    return exp


def test_a_population_is_read_back_member_by_member(tmp_path: Path) -> None:
    exp = _population(tmp_path)
    assert is_population(exp)
    assert not is_population(exp / TRIAL.format(i=0) / "run")  # a run, not a population
    members = read_population(exp)
    assert [m.label for m in members] == ["member 0", "member 1"]
    assert [i.env_steps for i in members[1].intervals] == [2000, 4000]  # the torn line skipped
    assert members[1].intervals[1].copied_from == TRIAL.format(i=0)
    assert member_label("my-run") == "my-run"


def test_a_checkpoint_says_whose_it_is(tmp_path: Path) -> None:
    assert read_origin(tmp_path) is None
    write_origin(tmp_path, TRIAL.format(i=3))
    assert read_origin(tmp_path) == TRIAL.format(i=3)
    assert json.loads((tmp_path / "member.json").read_text()) == {"trial": TRIAL.format(i=3)}


def test_the_table_ranks_members_and_says_whom_each_copied_when_and_how_often_it_started(
    tmp_path: Path,
) -> None:
    lines = member_table(read_population(_population(tmp_path)))
    assert lines[0].startswith("member 0: score 30 at 4000 env steps")
    assert lines[0].endswith("; started for 1 of 2 intervals")  # trained on, not restarted
    assert lines[1] == (
        "member 1: score 25 at 4000 env steps (learner.learning_rate=0.0012); "
        "copied member 0 at 2000; started for 2 of 2 intervals"
    )


def test_the_population_figure_is_written(tmp_path: Path) -> None:
    path = write_population_figure(read_population(_population(tmp_path)), tmp_path / "out")
    assert path == tmp_path / "out" / FIGURE
    assert path.stat().st_size > 10_000
