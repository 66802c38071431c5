"""The wandb sink for real (offline: this machine has no network), read back from its run file."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from wandb_records import history, read_finished, run_config, step_metrics

from mtrl.config import ExperimentConfig
from mtrl.tracking import make_sinks
from mtrl.tracking.wandb_sink import ID_FILE, STEP_METRIC, WandbSink

TASKS = ["cartpole", "gymnasium/Acrobot-v1"]


def _cfg(tmp_path: Path, **wandb: Any) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {
            "name": "wb",
            "tasks": [
                {"env": "gymnasium/CartPole-v1", "name": "cartpole"},
                {"env": "gymnasium/Acrobot-v1"},
            ],
            "tracking": {"run_dir": str(tmp_path), "wandb": {"mode": "offline", **wandb}},
        }
    )


def _record(i: int) -> dict[str, Any]:
    rec: dict[str, Any] = {
        STEP_METRIC: 1000 * i,
        "charts/sps": 500.0 + i,
        "charts/policy_lag": 0.5,
        "losses/total": 1.0 / (i + 1),
    }
    for k, task in enumerate(TASKS):
        rec[f"task/{task}/return"] = 10.0 * i + k
        rec[f"task/{task}/normalized_score"] = 0.1 * i
        rec[f"task/{task}/episode_length"] = 20.0 + i
        rec[f"popart/{task}/sigma"] = 1.0 + i
        rec[f"scheduler/{task}/actors"] = 1 + k
    return rec


def _run_file(run_dir: Path, run_id: str) -> list[Path]:
    return sorted(run_dir.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb"))


def test_offline_run_holds_config_and_every_metric(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, tags=["test"])
    run_dir = tmp_path / "wb__0__now"
    run_dir.mkdir()
    sinks = make_sinks(cfg, run_dir, TASKS, console="quiet")
    (wandb_sink,) = [s for s in sinks if isinstance(s, WandbSink)]
    records = [_record(i) for i in range(5)]
    for rec in records:
        sinks.write(rec)
    sinks.close()

    assert wandb_sink.error is None and wandb_sink.mode == "offline"
    run_id = (run_dir / ID_FILE).read_text().strip()
    (path,) = _run_file(run_dir, run_id)
    logged = read_finished(path)
    assert history(logged) == records
    assert run_config(logged) == cfg.model_dump(mode="json")  # the resolved config
    assert step_metrics(logged) == {STEP_METRIC: "", "*": STEP_METRIC}

    # A resumed run (same run dir) continues the same wandb run id. (wandb names the local
    # directory by the second and the id: start in the next second so they differ.)
    time.sleep(1.05 - time.time() % 1)
    again = WandbSink(cfg.tracking.wandb, name=run_dir.name, config={}, run_dir=run_dir)
    again.write(_record(5))
    again.close()
    assert again.run_id == run_id
    _, second = _run_file(run_dir, run_id)
    assert history(read_finished(second)) == [_record(5)]


def test_a_wandb_error_is_reported_once_and_training_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = _cfg(tmp_path, project="not/allowed")  # wandb refuses '/' in project names
    sink = WandbSink(cfg.tracking.wandb, name="x", config={}, run_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="mtrl.tracking"):
        assert sink.started.wait(60)
        for i in range(3):
            sink.write(_record(i))  # nothing raises
        sink.close()
    assert sink.error and "Invalid project name" in sink.error
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "training continues without wandb" in warnings[0]


def test_online_without_network_never_blocks_and_falls_back_to_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_API_KEY", "a" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    cfg = _cfg(tmp_path, mode="online", init_timeout_s=1)
    sink = WandbSink(cfg.tracking.wandb, name="x", config={"a": 1}, run_dir=tmp_path)
    records = [_record(i) for i in range(50)]
    t0 = time.perf_counter()
    for rec in records:
        sink.write(rec)
    assert time.perf_counter() - t0 < 0.5, "write() must only enqueue"
    assert not sink.started.is_set(), "the online start should still be trying"
    sink.close(timeout_s=120)
    assert sink.mode == "offline" and sink.error is None
    (path,) = _run_file(tmp_path, sink.run_id)
    assert history(read_finished(path)) == records  # nothing lost while wandb was stuck


RESOLVE = """
import os, sys
from mtrl.tracking.wandb_sink import resolve_mode
seen = [resolve_mode("auto")]                   # no credentials anywhere
os.environ["NETRC"] = sys.argv[1]
seen.append(resolve_mode("auto"))               # a key in netrc, found by wandb's reader
os.environ["NETRC"] = sys.argv[2]
os.environ["WANDB_API_KEY"] = "b" * 40
seen.append(resolve_mode("auto"))               # a key in the environment
os.environ["WANDB_MODE"] = "offline"
seen.append(resolve_mode("auto"))               # WANDB_MODE wins over the key
os.environ["WANDB_MODE"] = "disabled"
seen.append(resolve_mode("auto"))
seen.append(resolve_mode("online"))             # an explicit mode is kept
print(" ".join(seen))
"""


def test_auto_mode_is_online_only_with_credentials(tmp_path: Path) -> None:
    """In a fresh process with a clean home: no wandb settings, no WANDB_* variables."""
    empty, with_key = tmp_path / "empty_netrc", tmp_path / "netrc"
    empty.write_text("")
    with_key.write_text(f"machine api.wandb.ai\n  login user\n  password {'c' * 40}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(
        HOME=str(tmp_path),
        NETRC=str(empty),
        WANDB_CONFIG_DIR=str(tmp_path),
        WANDB_BASE_URL="https://api.wandb.ai",
    )
    res = subprocess.run(
        [sys.executable, "-c", RESOLVE, str(with_key), str(empty)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["offline", "online", "online", "offline", "disabled", "online"]


def test_disabled_makes_no_wandb_sink(tmp_path: Path) -> None:
    sinks = make_sinks(_cfg(tmp_path, mode="disabled"), tmp_path, TASKS, console="quiet")
    assert not any(isinstance(s, WandbSink) for s in sinks)
    sinks.close()
    assert not (tmp_path / "wandb").exists()
