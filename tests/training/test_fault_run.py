"""A real training run survives injected faults (``chaos/wrap`` tasks next to a healthy one):
raises, NaNs, kill -9 and hangs are counted per task and kind, the actors restarted, a task that
always fails is quarantined, and the run reaches ``total_env_steps``. If every task ends up
quarantined the run stops with a user error naming each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtrl.config import parse_config
from mtrl.errors import UserError
from mtrl.train.trainer import Trainer

pytestmark = pytest.mark.timeout(180)

COMMON = """
actors: {mode: process, start_method: forkserver}
learner: {unroll_length: 8, batch_size: 8, model: {encoder_dim: 16, torso: [16]}}
checkpoint: {enabled: false}
tracking: {console: quiet, log_every_s: 0.5, csv: false, wandb: {mode: disabled}}
"""


def _chaos(name: str, kwargs: str) -> str:
    return f"""
  - env: chaos/wrap
    name: {name}
    num_envs: 4
    env_kwargs: {{step_delay_s: 0.004, {kwargs}}}"""


@pytest.mark.slow
def test_the_run_finishes_despite_faults_and_a_quarantined_task(tmp_path: Path) -> None:
    once = f"faulty_instances: 1, marker_dir: {tmp_path}/markers"
    yaml = (
        """
name: faults
seed: 0
total_env_steps: 30000
scheduler: {num_actors: 6, max_restarts: 2, step_timeout_s: 2.0}
tasks:"""
        + _chaos("healthy", "env: gymnasium/CartPole-v1")
        + _chaos("raises", f"raise_after: 11, {once}/raise")
        + _chaos("nan", "nan_after: 3, seeds: [2]")  # task seed 0 + index 2: its first actor
        + _chaos("killed", f"kill_after: 11, {once}/kill")
        + _chaos("hangs", f"hang_after: 3, {once}/hang")
        + _chaos("broken", "raise_after: 0")
        + COMMON.replace("tracking: {", f"tracking: {{run_dir: {tmp_path}/runs, ")
    )
    trainer = Trainer(parse_config(yaml), console=False)
    try:
        result = trainer.run()
        faults = trainer.pool.faults
    finally:
        trainer.close()

    assert result.env_steps >= 30000, "the run reached total_env_steps"
    expected = {1: ("raise", 1), 2: ("nan", 1), 3: ("exit", 1), 4: ("hang", 1)}
    for t, (kind, n) in expected.items():
        assert faults[t].by_kind[kind] == faults[t].faults == n, (t, faults[t])
        assert faults[t].restarts == 1 and not faults[t].quarantined
    tasks = {r.name: r for r in result.tasks}
    # Each restarted actor delivered: more than the first actor's unroll before its fault.
    for name in ("raises", "nan", "killed", "hangs"):
        assert tasks[name].env_steps > 32, (name, tasks[name])
    assert faults[0].faults == 0 and tasks["healthy"].env_steps > 5000
    broken = faults[5]
    assert broken.quarantined and broken.by_kind["raise"] == 3
    assert broken.reason.startswith("task 'broken' quarantined: 3 of its 3 unroll attempts")
    assert tasks["broken"].env_steps == 0
    # The final greedy eval keeps tasks that recovered, and leaves out the quarantined task and
    # the one whose env hung (a hang in the trainer's process would stop the run).
    assert all(tasks[n].greedy_eval is not None for n in ("healthy", "raises", "nan", "killed"))
    assert tasks["hangs"].greedy_eval is None and tasks["broken"].greedy_eval is None

    (run_dir,) = (tmp_path / "runs").iterdir()
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["task/raises/faults"] == 1 and last["task/hangs/faults"] == 1
    assert last["task/broken/quarantined"] == 1 and last["task/healthy/quarantined"] == 0
    assert last["task/hangs/faults/hang"] == 1 and last["task/killed/faults/exit"] == 1
    assert last["task/nan/faults/nan"] == 1
    evaluated = ["healthy", "raises", "nan", "killed"]
    assert [k for k in last if k.startswith("eval/")] == [
        f"eval/{n}/greedy_return" for n in evaluated
    ]


def test_a_run_whose_every_task_is_quarantined_stops_with_a_user_error() -> None:
    yaml = (
        """
total_env_steps: 1000000
scheduler: {num_actors: 2, max_restarts: 1}
tasks:"""
        + _chaos("raises", "raise_after: 0")
        + _chaos("killed", "kill_after: 0")
        + COMMON
    )
    trainer = Trainer(parse_config(yaml), write_run_dir=False, console=False)
    try:
        with pytest.raises(UserError, match="every task is quarantined") as err:
            trainer.run()
    finally:
        trainer.close()
    message = str(err.value)
    assert "task 'raises' quarantined" in message and "ChaosError" in message
    assert "task 'killed' quarantined" in message and "killed by SIGKILL" in message
