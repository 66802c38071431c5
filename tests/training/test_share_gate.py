"""The weights on a real run: the actor of a cheap task (plain CartPole) delivers several times
the samples of a costly one (CartPole whose every step sleeps 6 ms; 0.7–0.9 of the data without
the gate), one actor each under ``balanced`` (nothing to move). The work-conserving gate does not
withhold the cheap task's data to fix that (the learner would idle); the loss weights give each
task its weight's share of the learning signal instead, gate or not."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from mtrl.config import parse_config
from mtrl.train.loss_weights import effective_shares
from mtrl.train.trainer import Trainer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _run(
    tmp_path: Path, gate: bool, seconds: float = 6.0, loss_weights: bool = True
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Each task's share of the learner's recent data and of the weighted learning signal (the
    queue's window at the end), and actors per task at the end."""
    yaml = f"""
name: gate
seed: 0
total_env_steps: 100000000
tasks:
  - {{env: chaos/wrap, name: cheap, num_envs: 4, env_kwargs: {{env: gymnasium/CartPole-v1}}}}
  - {{env: chaos/wrap, name: costly, num_envs: 4,
     env_kwargs: {{env: gymnasium/CartPole-v1, step_delay_s: 0.006}}}}
scheduler: {{policy: balanced, num_actors: 2, share_gate: {str(gate).lower()}, warmup_s: 1000,
             loss_weights: {str(loss_weights).lower()}}}
actors: {{mode: process, start_method: forkserver}}
learner: {{unroll_length: 8, batch_size: 8, model: {{encoder_dim: 16, torso: [16]}}}}
checkpoint: {{enabled: false}}
tracking: {{run_dir: {tmp_path}/runs, console: quiet, log_every_s: 1, csv: false,
           wandb: {{mode: disabled}}}}
"""
    trainer = Trainer(parse_config(yaml), console=False)
    timer = threading.Timer(seconds, trainer.request_stop)
    timer.start()
    try:
        trainer.run()
        actors = trainer.pool.actors_per_task()
    finally:
        timer.cancel()
        trainer.close()
    counts = trainer.queue.gate.counts
    return counts / counts.sum(), effective_shares(counts, trainer.queue.last_weights), actors


def test_with_the_gate_the_learner_takes_the_data_and_the_loss_weights_even_the_signal(
    tmp_path: Path,
) -> None:
    # warmup_s keeps both tasks at one actor each: nothing for `balanced` to move.
    data, signal, actors = _run(tmp_path, gate=True, seconds=8.0)
    assert data[0] > 0.6, f"the gate withheld the cheap task's data: share {data[0]:.2f}"
    assert abs(signal[0] - 0.5) < 0.05, f"cheap task's share of the signal {signal[0]:.2f}"
    assert actors == [1, 1]


def test_without_the_gate_the_weights_still_hold_and_without_weighting_data_rules(
    tmp_path: Path,
) -> None:
    data, signal, _ = _run(tmp_path, gate=False, seconds=4.0)
    assert data[0] > 0.6 and abs(signal[0] - 0.5) < 0.05, (data, signal)
    data, signal, _ = _run(tmp_path, gate=False, seconds=4.0, loss_weights=False)
    assert data[0] > 0.6, f"cheap task's share of learner data {data[0]:.2f}"
    np.testing.assert_allclose(signal, data)  # unweighted: the signal is the data mix
