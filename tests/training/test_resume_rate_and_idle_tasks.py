"""What ``mtrl train`` reports in the cases a newcomer met: a resumed run's steps/s counts only
the steps of this session; resuming a finished run says there is nothing to do and writes
nothing; a task that produced no step still has its row, with its faults and last error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mtrl.checkpoint import list_checkpoints
from mtrl.cli import main
from mtrl.config import parse_config
from mtrl.train.trainer import Trainer

pytestmark = pytest.mark.timeout(120)


def _config(tmp_path: Path, total: int) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(
        f"""
name: tiny
total_env_steps: {total}
tasks:
  - {{env: gymnasium/CartPole-v1, num_envs: 4}}
actors: {{mode: serial}}
learner: {{unroll_length: 16, batch_size: 8, model: {{encoder_dim: 16, torso: [16]}}}}
tracking: {{run_dir: {tmp_path / "runs"}, console: quiet, log_every_s: 0.05, csv: false,
            final_eval_episodes: 0, wandb: {{mode: disabled}}}}
"""
    )
    return path


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]


def test_resumed_steps_per_s_count_this_session_and_a_finished_run_has_nothing_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", str(_config(tmp_path, 3000))]) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    first = max(r["charts/env_steps"] for r in _metrics(run_dir))
    capsys.readouterr()

    # Continue to a larger budget: the rate is this session's steps over this session's time.
    trainer = Trainer.resume(run_dir, console=False, total_env_steps=6000)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    assert result.start_env_steps == first
    assert result.session_env_steps == result.env_steps - first > 0
    assert result.steps_per_s == pytest.approx(result.session_env_steps / result.seconds)
    from mtrl.cli.tables import print_train_results

    capsys.readouterr()
    print_train_results(result)
    title = capsys.readouterr().out
    shown = re.search(r"\(([\d,]+) this session\).*\(([\d,]+) steps/s\)", title)
    assert shown, title
    assert int(shown[1].replace(",", "")) == result.session_env_steps
    assert int(shown[2].replace(",", "")) == round(result.steps_per_s)

    # The run is at its budget now: resuming it trains nothing and writes nothing.
    checkpoints = {p: p.stat().st_mtime_ns for p in list_checkpoints(run_dir)}
    rows = (run_dir / "metrics.jsonl").read_text()
    assert main(["train", "--resume", str(run_dir)]) == 0
    out = capsys.readouterr().out
    done = result.env_steps
    assert out.strip() == (
        f"nothing to do: run already at {done:,} of 6,000 env steps "
        "(raise --total-env-steps to continue)"
    )
    assert {p: p.stat().st_mtime_ns for p in list_checkpoints(run_dir)} == checkpoints
    assert (run_dir / "metrics.jsonl").read_text() == rows


def test_a_task_that_made_no_step_keeps_its_row_with_faults_and_last_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = parse_config(
        f"""
name: idle
total_env_steps: 3000
tasks:
  - {{env: gymnasium/CartPole-v1, name: healthy, num_envs: 4}}
  - {{env: chaos/wrap, name: broken, num_envs: 2,
      env_kwargs: {{env: gymnasium/CartPole-v1, raise_after: 0}}}}
actors: {{mode: thread}}
scheduler: {{num_actors: 2, max_restarts: 1}}
learner: {{unroll_length: 16, batch_size: 8, model: {{encoder_dim: 16, torso: [16]}}}}
checkpoint: {{enabled: false}}
tracking: {{run_dir: {tmp_path / "runs"}, console: quiet, log_every_s: 0.05, csv: false,
            final_eval_episodes: 0, wandb: {{mode: disabled}}}}
"""
    )
    trainer = Trainer(cfg, console=False)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    capsys.readouterr()
    broken = {t.name: t for t in result.tasks}["broken"]
    assert broken.env_steps == 0 and broken.faults >= 1
    assert "ChaosError" in broken.last_error

    from mtrl.cli.tables import print_train_results

    print_train_results(result)
    table = capsys.readouterr().out
    (row,) = [line for line in table.splitlines() if "broken" in line]
    assert "0 (no steps)" in row
    assert re.search(rf"\b{broken.faults}\b", row), row
    assert "ChaosError" in table
    assert "last error" in table and "faults" in table
