"""The TensorBoard tracker for real: a short training run's event files read back with
TensorBoard's own reader, records at their env steps, a resumed run beside the first, and the
one-line error of a run that asks for TensorBoard where it is not installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from tensorboard.backend.event_processing.event_accumulator import (
    HISTOGRAMS,
    SCALARS,
    TENSORS,
    EventAccumulator,
)

from mtrl.cli import main
from mtrl.config import ExperimentConfig
from mtrl.tracking import make_sinks
from mtrl.tracking.tensorboard_sink import CONFIG_TAG, TensorboardSink

RETURN = "task/cartpole/return"


def _events(path: Path) -> EventAccumulator:
    """Every event under ``path`` (all sizes kept: TensorBoard samples by default)."""
    acc = EventAccumulator(str(path), size_guidance={SCALARS: 0, TENSORS: 0, HISTOGRAMS: 0})
    acc.Reload()
    return acc


def _config_text(acc: EventAccumulator) -> str:
    (event,) = acc.Tensors(f"{CONFIG_TAG}/text_summary")
    return event.tensor_proto.string_val[0].decode()


def test_a_training_run_writes_its_metrics_at_their_env_steps(tmp_path: Path) -> None:
    cfg = tmp_path / "tb.yaml"
    cfg.write_text(
        "name: tb\ntotal_env_steps: 4000\nseed: 3\n"
        "tasks:\n  - {env: gymnasium/CartPole-v1, name: cartpole, num_envs: 4}\n"
        "actors: {mode: serial}\nlearner: {batch_size: 4, unroll_length: 16}\n"
        f"tracking: {{run_dir: {tmp_path / 'runs'}, console: quiet, log_every_s: 0.05, "
        "wandb: {mode: disabled}, final_eval_episodes: 0, "
        "tensorboard: {enabled: true, histograms: true}}\n"
    )
    assert main(["train", str(cfg)]) == 0
    (run_dir,) = (tmp_path / "runs").glob("tb__*")
    acc = _events(run_dir / "tensorboard")

    steps = [e.step for e in acc.Scalars("charts/env_steps")]
    assert len(steps) >= 2 and steps == sorted(steps) and steps[-1] >= 4000
    assert [e.value for e in acc.Scalars("charts/env_steps")] == steps  # the x-axis is itself
    returns = acc.Scalars(RETURN)
    assert len(returns) >= 2 and all(e.value >= 8 for e in returns)  # CartPole: ≥ 8 steps
    assert [e.step for e in returns] == sorted(e.step for e in returns)
    assert {"charts/sps", "losses/total", "task/cartpole/episodes"} <= set(acc.Tags()["scalars"])

    logged = yaml.safe_load(_config_text(acc))  # the resolved config, as the run dir has it
    assert logged == yaml.safe_load((run_dir / "config.yaml").read_text())
    assert logged["name"] == "tb" and logged["tracking"]["tensorboard"]["enabled"] is True

    histograms = acc.Histograms("task/cartpole/episode_returns")
    assert histograms and sum(h.histogram_value.num for h in histograms) >= len(returns)


def _cfg(tmp_path: Path, **tensorboard: Any) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {
            "name": "direct",
            "tasks": [{"env": "gymnasium/CartPole-v1", "name": "cartpole"}],
            "tracking": {
                "console": "quiet",
                "wandb": {"mode": "disabled"},
                "tensorboard": {"enabled": True, **tensorboard},
            },
        }
    )


def test_a_shared_dir_holds_one_folder_per_run_and_a_resume_adds_to_it(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, dir=str(tmp_path / "tb"))
    run_dir = tmp_path / "direct__0__now"
    run_dir.mkdir()
    for session in range(2):  # the run, then the same run resumed
        sinks = make_sinks(cfg, run_dir, ["cartpole"])
        assert any(isinstance(s, TensorboardSink) for s in sinks)
        for i in range(3):
            steps = 1000 * (3 * session + i + 1)
            sinks.write({"charts/env_steps": steps, RETURN: float(steps) / 100, "note": "text"})
        sinks.close()
    assert not (run_dir / "tensorboard").exists()
    acc = _events(tmp_path / "tb" / run_dir.name)
    assert [(e.step, e.value) for e in acc.Scalars(RETURN)] == [
        (1000 * k, 10.0 * k) for k in range(1, 7)
    ]
    assert "note" not in acc.Tags()["scalars"]  # only numbers become scalars
    assert len(list((tmp_path / "tb" / run_dir.name).glob("events.out.tfevents.*"))) == 2


def test_off_by_default_and_without_a_run_directory(tmp_path: Path) -> None:
    off = ExperimentConfig.model_validate({"tasks": [{"env": "gymnasium/CartPole-v1"}]})
    assert off.tracking.tensorboard.enabled is False
    for cfg, run_dir in ((off, tmp_path), (_cfg(tmp_path), None)):
        sinks = make_sinks(cfg, run_dir, ["cartpole"], console="quiet")
        assert not any(isinstance(s, TensorboardSink) for s in sinks)
        sinks.close()
    assert not (tmp_path / "tensorboard").exists()


NO_TENSORBOARD = """
import sys
sys.modules["tensorboard"] = None  # as on a machine where it is not installed
from mtrl.cli import main
sys.exit(main([sys.argv[2], sys.argv[1]]))
"""


def test_tensorboard_asked_for_and_not_installed_stops_with_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "tb.yaml"
    cfg.write_text(
        "name: tb\ntotal_env_steps: 1000\n"
        "tasks:\n  - {env: gymnasium/CartPole-v1, num_envs: 2}\n"
        "actors: {mode: serial}\n"
        f"tracking: {{run_dir: {tmp_path / 'runs'}, console: quiet, "
        "wandb: {mode: disabled}, tensorboard: {enabled: true}}\n"
    )
    missing = (
        "tracking.tensorboard.enabled is true but the tensorboard package is not "
        "installed: pip install tensorboard (or pip install 'mtrl[tensorboard]')"
    )
    for command, line in (("validate", f"{cfg}: {missing}"), ("train", f"error: {missing}")):
        res = subprocess.run(
            [sys.executable, "-c", NO_TENSORBOARD, str(cfg), command],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert res.returncode == 2, res.stderr
        assert res.stderr.strip().splitlines() == [line], command
    assert not list((tmp_path / "runs").glob("tb__*"))  # nothing half-made is left
