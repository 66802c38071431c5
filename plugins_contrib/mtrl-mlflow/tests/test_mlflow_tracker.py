"""The MLflow tracker against a real local MLflow file store: a real ``mtrl train`` read back
with MLflow's own client, its settings checked by ``mtrl validate`` and shown by ``mtrl
schema``, and a resumed run continuing its MLflow run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mlflow")

from mlflow.tracking import MlflowClient
from mtrl_mlflow.plugin import make_mlflow, tracking_uri
from mtrl_mlflow.settings import MlflowSettings
from mtrl_mlflow.sink import RUN_FILE

from mtrl.config import parse_config
from mtrl.plugins import load_plugins

ROOT = Path(__file__).resolve().parents[3]
TASK = "gymnasium/CartPole-v1"


@pytest.fixture(autouse=True)
def _own_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """No tracking URI from the environment: each test's store is its own."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")


def _config(tmp_path: Path, mlflow: str) -> Path:
    path = tmp_path / "cartpole.yaml"
    path.write_text(
        "name: cartpole-mlflow\n"
        "total_env_steps: 4000\n"
        "tasks:\n"
        f"  - env: {TASK}\n"
        "    num_envs: 8\n"
        "actors:\n"
        "  mode: serial\n"
        "learner:\n"
        "  unroll_length: 20\n"
        "  batch_size: 8\n"
        "checkpoint:\n"
        "  enabled: false\n"
        "tracking:\n"
        f"  run_dir: {tmp_path / 'runs'}\n"
        "  console: quiet\n"
        "  log_every_s: 0.2\n"
        "  final_eval_episodes: 0\n"
        "  wandb:\n"
        "    mode: disabled\n"
        f"{mlflow}",
        encoding="utf-8",
    )
    return path


def _line(path: Path, text: str) -> int:
    """The 1-based line of ``path`` that starts (after indentation) with ``text``."""
    lines = path.read_text().splitlines()
    return next(i for i, x in enumerate(lines, 1) if x.lstrip().startswith(text))


def _mtrl(*args: str) -> subprocess.CompletedProcess[str]:
    """``mtrl ARGS`` with the built-in plugins and this one; MLflow's file store is not
    allowed by the environment (the tracker allows it for the store its config names)."""
    env = {**os.environ, "MTRL_PLUGINS": "mlflow"}
    env.pop("MLFLOW_ALLOW_FILE_STORE", None)
    return subprocess.run(
        [sys.executable, "-m", "mtrl.cli", *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env=env,
    )


def test_a_training_run_is_read_back_with_mlflows_client(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "  mlflow:\n    experiment: ci\n    tags: {team: rl}\n")
    res = _mtrl("train", str(cfg))
    assert res.returncode == 0, res.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    client = MlflowClient(tracking_uri=(run_dir / "mlruns").as_uri())
    experiment = client.get_experiment_by_name("ci")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.info.run_name == run_dir.name
    assert run.data.tags["team"] == "rl" and run.data.tags["mtrl.config"] == "cartpole-mlflow"
    params = run.data.params
    assert params["total_env_steps"] == "4000"
    assert params["tasks.0.env"] == TASK
    assert params["learner.batch_size"] == "8"
    assert params["tracking.mlflow.experiment"] == "ci"
    # Every record of metrics.jsonl is in MLflow at its env step.
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [int(r["charts/env_steps"]) for r in records]
    history = client.get_metric_history(run.info.run_id, "charts.env_steps")
    assert [int(m.step) for m in history] == steps
    assert [m.value for m in history] == [float(s) for s in steps]
    assert steps[-1] >= 4000
    # The file store keeps a metric per file: ``/`` in names becomes ``.``.
    returns = client.get_metric_history(run.info.run_id, f"task.{TASK.replace('/', '.')}.return")
    logged = {int(r["charts/env_steps"]): r[f"task/{TASK}/return"] for r in records
              if f"task/{TASK}/return" in r}  # fmt: skip
    assert returns and {int(m.step): m.value for m in returns} == pytest.approx(logged)
    saved = json.loads((run_dir / RUN_FILE).read_text())
    assert saved["run_id"] == run.info.run_id


def test_a_bad_setting_is_one_validate_line_with_file_and_line(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "  mlflow:\n    experiment: ci\n    tracking_ur: /tmp/x\n")
    res = _mtrl("validate", str(cfg))
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"{cfg}:{_line(cfg, 'tracking_ur:')}: tracking.mlflow.tracking_ur: unknown key "
        "'tracking_ur'; did you mean 'tracking_uri'?"
    ]


def test_a_bad_value_and_an_unknown_section_are_a_line_each(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "  mlflow:\n    finish_timeout_s: -1\n  mlfow:\n    experiment: ci\n")
    res = _mtrl("validate", str(cfg))
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"{cfg}:{_line(cfg, 'finish_timeout_s:')}: tracking.mlflow.finish_timeout_s: Input "
        "should be greater than 0 (got -1)",
        f"{cfg}:{_line(cfg, 'mlfow:')}: tracking.mlfow: unknown key 'mlfow'; did you mean "
        "'mlflow'? (a tracker's section needs its plugin installed; trackers with settings: "
        "mlflow)",
    ]


def test_the_schema_has_the_mlflow_section() -> None:
    res = _mtrl("schema")
    assert res.returncode == 0, res.stderr
    schema = json.loads(res.stdout)
    section = schema["$defs"]["TrackingConfig"]["properties"]["mlflow"]
    assert {"tracking_uri", "experiment", "run_name"} <= set(section["properties"])


def _cfg(tmp_path: Path, section: str = "") -> Any:
    """A config validated with the built-in trackers and this plugin's settings model."""
    models = {**load_plugins(autoload=False).trackers.settings_models(), "mlflow": MlflowSettings}
    text = f"tasks:\n  - env: {TASK}\ntracking:\n  console: quiet\n{section}"
    return parse_config(text, "c.yaml", tracker_settings=models)


def test_without_a_section_the_tracker_stays_out(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    assert make_mlflow(cfg, tmp_path, [TASK], None) is None
    off = _cfg(tmp_path, "  mlflow:\n    enabled: false\n")
    assert make_mlflow(off, tmp_path, [TASK], off.tracking.section("mlflow")) is None


def test_the_store_defaults_to_the_run_directory_and_paths_become_file_uris(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert tracking_uri(MlflowSettings(), tmp_path) == (tmp_path / "mlruns").as_uri()
    assert tracking_uri(MlflowSettings(), None) is None
    rel = MlflowSettings(tracking_uri="store")
    monkeypatch.chdir(tmp_path)
    assert tracking_uri(rel, None) == (tmp_path / "store").as_uri()
    assert tracking_uri(MlflowSettings(tracking_uri="http://h:5000"), None) == "http://h:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///x.db")
    assert tracking_uri(MlflowSettings(), tmp_path) == "sqlite:///x.db"


def test_a_resumed_run_goes_on_in_the_same_mlflow_run(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "  mlflow:\n")
    settings = cfg.tracking.section("mlflow")
    for step in (100, 200):  # the run, then its resumption in the same run directory
        sink = make_mlflow(cfg, tmp_path, [TASK], settings)
        sink.write({"charts/env_steps": step, "losses/total": step / 100})
        sink.close()
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("mtrl").experiment_id])
    history = client.get_metric_history(run.info.run_id, "losses.total")
    assert [(m.step, m.value) for m in history] == [(100, 1.0), (200, 2.0)]
    assert run.info.status == "FINISHED"
