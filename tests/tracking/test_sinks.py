"""Metric files (JSONL, CSV), the failure-isolating sink group and the make_sinks factory."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mtrl.config import ExperimentConfig
from mtrl.tracking import Sink, SinkGroup, builtin_trackers, make_sinks
from mtrl.tracking.console import JsonlConsole, PlainConsole
from mtrl.tracking.csv_sink import CsvSink
from mtrl.tracking.episodes import EpisodeCsvSink
from mtrl.tracking.sinks import JsonlSink


def _cfg(tmp_path: Path, console: str = "quiet") -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {
            "tasks": [{"env": "gymnasium/CartPole-v1"}],
            "tracking": {
                "run_dir": str(tmp_path),
                "console": console,
                "wandb": {"mode": "disabled"},
            },
        }
    )


def test_csv_header_grows_and_pandas_reads_every_key(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    sink = CsvSink(path)
    sink.write({"charts/sps": 10.0, "charts/env_steps": 100})
    sink.write({"charts/env_steps": 200, "charts/sps": 11.0, "task/a/b/return": 5.5})
    mid = pd.read_csv(path)  # readable while the run goes on
    assert list(mid.columns) == ["charts/env_steps", "charts/sps", "task/a/b/return"]
    sink.write({"charts/env_steps": 300, "popart/a/b/sigma": np.float32(2.0), "x": math.nan})
    sink.close()

    resumed = CsvSink(path)  # a resumed run appends under the same header, growing it again
    resumed.write({"charts/env_steps": 400, "task/a/b/return": 7.0, "late": 1})
    resumed.close()
    df = pd.read_csv(path)
    assert list(df["charts/env_steps"]) == [100, 200, 300, 400]
    assert df["charts/sps"].tolist()[:2] == [10.0, 11.0] and df["charts/sps"][2:].isna().all()
    assert df["task/a/b/return"].tolist()[1] == 5.5 and df["task/a/b/return"].tolist()[3] == 7.0
    assert df["popart/a/b/sigma"][2] == 2.0 and math.isnan(df["x"][2])
    assert df["late"].tolist()[3] == 1
    assert not list(tmp_path.glob(".*.tmp"))


def test_jsonl_roundtrips_numpy_scalars_and_nan(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "m.jsonl")
    sink.write({"a": np.float64(1.5), "b": np.int64(3), "c": math.nan, "d": math.inf})
    sink.close()
    (row,) = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert row["a"] == 1.5 and row["b"] == 3 and math.isnan(row["c"]) and row["d"] == math.inf
    assert pd.read_json(tmp_path / "m.jsonl", lines=True)["a"][0] == 1.5


class Exploding:
    def __init__(self) -> None:
        self.closed = False

    def write(self, record: dict[str, Any]) -> None:
        raise OSError("disk full")

    def close(self) -> None:
        self.closed = True


class Collect:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, record: dict[str, Any]) -> None:
        self.records.append(dict(record))

    def close(self) -> None:
        pass


def test_sink_group_drops_a_failing_sink_and_keeps_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad, good = Exploding(), Collect()
    group = SinkGroup([bad, good])
    with caplog.at_level(logging.WARNING, logger="mtrl.tracking"):
        for i in range(3):
            group.write({"charts/env_steps": i})
    assert [r["charts/env_steps"] for r in good.records] == [0, 1, 2]
    assert len(caplog.records) == 1 and "Exploding failed" in caplog.records[0].getMessage()
    assert "disk full" in caplog.records[0].getMessage()
    group.close()
    assert not bad.closed  # already dropped


def test_make_sinks_writes_files_and_takes_plugin_trackers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    collected = Collect()

    def tracker(cfg: ExperimentConfig, run_dir: Path | None, names: list[str]) -> Sink:
        assert run_dir == tmp_path and names == ["gymnasium/CartPole-v1"]
        return collected

    def broken(cfg: ExperimentConfig, run_dir: Path | None, names: list[str]) -> Sink:
        raise RuntimeError("no server")

    def not_a_sink(cfg: ExperimentConfig, run_dir: Path | None, names: list[str]) -> Any:
        return 42

    with caplog.at_level(logging.WARNING, logger="mtrl.tracking"):
        sinks = make_sinks(
            _cfg(tmp_path),
            tmp_path,
            ["gymnasium/CartPole-v1"],
            [*builtin_trackers(), tracker, broken, not_a_sink],
        )
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "broken failed to start" in messages and "no server" in messages
    assert "not_a_sink returned a int" in messages
    assert [type(s) for s in sinks] == [JsonlSink, CsvSink, EpisodeCsvSink, Collect]
    sinks.write({"charts/env_steps": 1, "task/gymnasium/CartPole-v1/return": 9.0})
    sinks.close()
    assert collected.records == [{"charts/env_steps": 1, "task/gymnasium/CartPole-v1/return": 9.0}]
    assert pd.read_csv(tmp_path / "metrics.csv").shape == (1, 2)
    assert pd.read_json(tmp_path / "metrics.jsonl", lines=True).shape == (1, 2)


@pytest.mark.parametrize(("mode", "kind"), [("auto", PlainConsole), ("jsonl", JsonlConsole)])
def test_console_choice(tmp_path: Path, mode: str, kind: type) -> None:
    """``auto`` on a non-terminal stream (a batch job's log) gives plain lines."""
    import io

    sinks = make_sinks(_cfg(tmp_path, mode), None, ["gymnasium/CartPole-v1"], stream=io.StringIO())
    assert [type(s) for s in sinks] == [kind]
    sinks.close()
