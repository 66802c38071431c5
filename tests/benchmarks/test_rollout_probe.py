"""benchmarks/rollout_probe.py: the distances of an episode from its positions, and the probe of
a real checkpoint (a short Pendulum SAC run) playing the same greedy episodes as ``mtrl eval``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from mtrl.config import parse_config
from mtrl.train.evaluate import evaluate, load_for_eval
from mtrl.train.trainer import Trainer

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import rollout_probe as rp  # noqa: E402


def test_an_episodes_distances_come_from_its_positions() -> None:
    hand = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    obj = np.array([[3.0, 0.0], [3.0, 0.0], [3.0, 4.0]])
    goal = np.array([[3.0, 1.0]] * 3)
    got = rp.probe_episode(hand, obj, goal)
    assert got["min_hand_object"] == pytest.approx(2.0)
    assert got["final_hand_object"] == pytest.approx(np.hypot(1.0, 4.0))
    assert got["object_moved"] == pytest.approx(4.0)
    assert got["min_object_goal"] == pytest.approx(1.0)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run directory of a short SAC run on one Pendulum copy (its final checkpoint)."""
    root = tmp_path_factory.mktemp("runs")
    cfg = parse_config(
        f"""
        name: probetest
        total_env_steps: 600
        tasks:
          - {{env: gymnasium/Pendulum-v1, num_envs: 1}}
        actors: {{mode: serial}}
        learner:
          algorithm: sac
          batch_size: 32
          model: {{encoder_dim: 16, torso: [16]}}
          sac: {{learning_starts: 200}}
        tracking: {{run_dir: {root}, console: quiet, wandb: {{mode: disabled}}}}
        """
    )
    trainer = Trainer(cfg, console=False)
    try:
        trainer.run()
    finally:
        trainer.close()
    (run,) = root.iterdir()
    return run


def test_the_probe_plays_mtrl_evals_greedy_episodes(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    # Pendulum's observation is (cos θ, sin θ, θ'): any three one-value slices will do
    args = [str(run_dir), "--episodes", "2", "--hand", "0:1", "--object", "1:2"]
    assert rp.main([*args, "--goal", "2:3", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["task"] == "gymnasium/Pendulum-v1" and row["episodes"] == 2
    assert row["success"] is None, "Pendulum reports no success"
    (greedy,) = evaluate(load_for_eval(run_dir), episodes=2, modes=("greedy",))
    assert row["ret"] == pytest.approx(greedy.mean_return, rel=1e-6)
    assert 0.0 <= row["saturated"] <= 1.0


def test_a_slice_past_the_observation_is_one_line_and_exit_2(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert rp.main([str(run_dir), "--object", "1:9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Pendulum-v1" in err[0] and "3 values" in err[0], err
    assert rp.main([str(run_dir), "--hand", "three"]) == 2
