"""Writers of run files on a real full, read-only or removed disk: a checkpoint write fails
with one clear error, leaves no temp file and keeps every checkpoint already written; metric
sinks turn themselves off with one warning line and nothing escapes as an exception."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import torch

from mtrl.checkpoint import (
    CheckpointWriteError,
    checkpoint_dir,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from mtrl.config import parse_config
from mtrl.errors import UserError
from mtrl.tracking.factory import make_sinks
from mtrl.tracking.run_dir import create_run_dir
from tests.small_fs import fill, read_only, tmpfs

STATE = {"w": torch.arange(250_000, dtype=torch.float32)}  # 1 MB


def _no_temp_files(run_dir: Path) -> bool:
    return not list(checkpoint_dir(run_dir).glob(".*"))


def test_a_full_disk_keeps_the_checkpoints_written_and_says_so(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", "6m") as fs:
        run = fs / "run"
        first = save_checkpoint(run, STATE, 100, keep_last=3)
        fill(fs)
        with pytest.raises(CheckpointWriteError) as err:
            save_checkpoint(run, STATE, 200, keep_last=1)  # would prune the first after it
        message = str(err.value)
        assert "no space left on device" in message and str(checkpoint_dir(run)) in message
        assert "200 env steps" in message
        assert _no_temp_files(run)
        assert list_checkpoints(run) == [first]
        assert torch.equal(load_checkpoint(first)["w"], STATE["w"])


def test_a_read_only_run_directory_keeps_the_checkpoints_and_says_so(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = save_checkpoint(run, STATE, 100, keep_last=1)
    with read_only(run):
        with pytest.raises(CheckpointWriteError, match="read-only file system"):
            save_checkpoint(run, STATE, 200, keep_last=1, create=False)
        assert list_checkpoints(run) == [first]
    assert _no_temp_files(run)
    load_checkpoint(first)


def test_a_removed_run_directory_is_reported_not_made_again(tmp_path: Path) -> None:
    run = tmp_path / "run"
    save_checkpoint(run, STATE, 100, keep_last=1)
    shutil.rmtree(run)
    with pytest.raises(CheckpointWriteError, match="no longer exists") as err:
        save_checkpoint(run, STATE, 200, keep_last=1, create=False)
    assert str(run) in str(err.value)
    assert not run.exists()


def _cfg(tmp_path: Path):
    return parse_config(
        f"""
name: sinks
total_env_steps: 1000
tasks: [{{env: gymnasium/CartPole-v1}}]
tracking: {{run_dir: {tmp_path}, console: quiet, wandb: {{mode: disabled}}}}
"""
    )


def test_metric_sinks_on_a_full_disk_warn_once_each_and_never_raise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    with tmpfs(tmp_path / "fs", "1m") as fs:
        cfg = _cfg(fs)
        run = create_run_dir(fs, "sinks", 0, {})
        sinks = make_sinks(cfg, run, ["a"])
        sinks.write({"charts/env_steps": 1, "task/a/return": 1.0})
        fill(fs)
        with caplog.at_level(logging.WARNING, logger="mtrl.tracking"):
            for step in range(2, 400):  # rows of a few KB: more than the pages left
                sinks.add_episodes("a", step, [float(step)] * 20, [10] * 20, float(step))
                sinks.write({"charts/env_steps": step, f"task/a/new_{step}": 1.0})
            sinks.close()
        warnings = [r.getMessage() for r in caplog.records]
        for name in ("metrics.jsonl", "metrics.csv", "episodes.csv"):
            said = [w for w in warnings if name in w]
            assert len(said) == 1, (name, warnings)
            assert "no space left on device" in said[0], said
        assert not list(run.glob(".*.tmp")), "a metrics.csv rewrite left its temp file"
    assert "Traceback" not in capfd.readouterr().err


def test_a_run_directory_that_cannot_be_made_is_one_clear_error(tmp_path: Path) -> None:
    parent = tmp_path / "runs"
    parent.mkdir()
    with read_only(parent), pytest.raises(UserError, match="read-only file system") as err:
        create_run_dir(parent, "x", 0, {"a": 1})
    assert "tracking.run_dir" in str(err.value)
    assert not list(parent.iterdir())
