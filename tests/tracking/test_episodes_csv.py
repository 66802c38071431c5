"""``episodes.csv``: every finished episode, buffered, flushed with each record, resumable."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mtrl.config import ExperimentConfig
from mtrl.tracking import EpisodeSink, Sink, SinkGroup, make_sinks
from mtrl.tracking.episodes import COLUMNS, FILENAME, EpisodeCsvSink, read_episodes


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_rows_wait_for_the_next_record(tmp_path: Path) -> None:
    path = tmp_path / FILENAME
    sink = EpisodeCsvSink(path)
    assert isinstance(sink, Sink) and isinstance(sink, EpisodeSink)
    assert _lines(path) == [",".join(COLUMNS)]  # the header at once: readable from the start
    sink.add_episodes("cartpole", 320, [21.0, 17.5], [21, 18], 5.0)
    sink.add_episodes("minatar/breakout", 160, [0.30000001], [55], 8.12345)
    assert len(_lines(path)) == 1  # buffered: nothing written per episode
    sink.write({"charts/env_steps": 480, "charts/elapsed_s": 12.0})
    assert _lines(path)[1:] == [
        "cartpole,320,21,21,5.000",
        "cartpole,320,17.5,18,5.000",
        "minatar/breakout,160,0.3,55,8.123",
    ]
    sink.add_episodes("cartpole", 640, [30.0], [30], 12.5)
    sink.close()  # close writes what waits
    sink.close()
    df = pd.read_csv(path)
    assert list(df.columns) == list(COLUMNS) and len(df) == 4
    assert df["return"].tolist() == [21.0, 17.5, 0.3, 30.0]
    assert df["wall_s"].tolist()[-1] == 12.5


def test_a_resumed_run_appends_under_one_header_after_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / FILENAME
    first = EpisodeCsvSink(path)
    first.add_episodes("a", 100, [1.0, 2.0], [10, 10], 50.0)
    first.write({"charts/elapsed_s": 50.0})
    first.add_episodes("a", 200, [9.0], [10], 55.0)  # never written: the crash loses it
    first._f.write("a,150,3")  # a row torn by the crash
    first._f.close()

    second = EpisodeCsvSink(path)  # resumed
    second.add_episodes("a", 150, [4.0], [10], 51.0)
    second.close()
    assert _lines(path) == [
        ",".join(COLUMNS),
        "a,100,1,10,50.000",
        "a,100,2,10,50.000",
        "a,150,3",
        "a,150,4,10,51.000",
    ]
    with pytest.warns(UserWarning, match="skipped 1 unreadable row"):
        episodes = read_episodes(path)
    assert episodes["a"].returns.tolist() == [1.0, 2.0, 4.0]


def test_reading_drops_the_stretch_a_resume_lived_again(tmp_path: Path) -> None:
    path = tmp_path / FILENAME
    rows = [  # (task, env steps, return, wall s)
        ("a", 100, 1, 1.0),
        ("b", 100, 5, 1.0),
        ("c", 100, 7, 1.0),
        ("a", 200, 2, 2.0),
        ("a", 200, 3, 2.0),
        ("c", 300, 8, 3.0),  # counted after the checkpoint (at 2.5 s): abandoned
        ("a", 300, 4, 3.0),  # the crash; the checkpoint was at 150 steps of a, 2.5 s
        ("a", 200, 12, 2.6),  # steps and seconds go back
        ("a", 200, 13, 2.6),
        ("a", 400, 14, 3.5),
        ("b", 200, 6, 3.5),  # b had nothing past its checkpoint: kept whole
        ("c", 350, 9, 2.7),  # c's steps do not go back, its seconds do
    ]
    text = ",".join(COLUMNS) + "\n"
    text += "".join(f"{t},{s},{r},10,{w}\n" for t, s, r, w in rows)
    text += "a,500,nan,10,9.0\n"  # a non-finite return: nothing to draw
    path.write_text(text)
    episodes = read_episodes(path)
    assert episodes["a"].returns.tolist() == [1, 12, 13, 14]
    assert episodes["a"].env_steps.tolist() == [100, 200, 200, 400]
    assert episodes["a"].wall_s.tolist() == [1.0, 2.6, 2.6, 3.5]
    assert episodes["b"].returns.tolist() == [5, 6] and len(episodes["b"]) == 2
    assert episodes["c"].returns.tolist() == [7, 9]
    assert read_episodes(tmp_path / "absent.csv") == {}


def test_many_waiting_rows_are_written_without_a_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mtrl.tracking.episodes.MAX_PENDING", 10)
    sink = EpisodeCsvSink(tmp_path / FILENAME)
    sink.add_episodes("a", 100, [1.0] * 6, [5] * 6, 1.0)
    assert len(_lines(tmp_path / FILENAME)) == 1
    sink.add_episodes("a", 200, [1.0] * 6, [5] * 6, 2.0)
    assert len(_lines(tmp_path / FILENAME)) == 13
    sink.close()


class Failing:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def add_episodes(self, *args: Any) -> None:
        raise OSError("disk full")

    def write(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def close(self) -> None:
        pass


def test_the_group_feeds_episode_sinks_and_drops_a_failing_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good, bad = EpisodeCsvSink(tmp_path / FILENAME), Failing()
    group = SinkGroup([bad, good])
    group.add_episodes("a", 10, [], [], 0.5)  # no episode: no call at all
    assert len(group) == 2
    with caplog.at_level(logging.WARNING, logger="mtrl.tracking"):
        group.add_episodes("a", 10, [1.0], [10], 0.5)
        group.add_episodes("a", 20, [2.0], [10], 0.7)
    assert "Failing failed" in caplog.text and list(group) == [good]
    group.write({"charts/elapsed_s": 1.0})
    group.close()
    assert read_episodes(tmp_path / FILENAME)["a"].returns.tolist() == [1.0, 2.0]


def test_make_sinks_keeps_episodes_in_the_run_directory(tmp_path: Path) -> None:
    cfg = ExperimentConfig.model_validate(
        {
            "tasks": [{"env": "gymnasium/CartPole-v1", "name": "cp"}],
            "tracking": {"console": "quiet", "wandb": {"mode": "disabled"}, "csv": False},
        }
    )
    sinks = make_sinks(cfg, tmp_path, ["cp"])
    assert any(isinstance(s, EpisodeCsvSink) for s in sinks)
    sinks.add_episodes("cp", 64, [12.0, 15.0], [12, 15], 3.0)
    sinks.write({"charts/env_steps": 64, "charts/elapsed_s": 3.0})
    sinks.close()
    assert read_episodes(tmp_path / FILENAME)["cp"].lengths.tolist() == [12, 15]
    assert [type(s) for s in make_sinks(cfg, None, ["cp"])] == []  # no run directory, no file
