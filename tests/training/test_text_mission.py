"""A text-conditioned task trains end to end: a Dict observation {"image": Box, "mission":
Text}, as in BabyAI/MiniGrid, where the right action depends only on one word of the mission.

``GoToDoor`` (the built-in ``mission/GoToDoor-v0``'s env, registered here again in-process as
plugin ``texty``) is a one-step contextual bandit: the mission reads "go to the {red|green|blue}
door", the image is noise, and action ``i`` earns 1 when it names the mission's colour
(random play: 1/3). Real env, real plugin registration (in-process, as plugin ``texty``), real
``mtrl train`` / ``mtrl validate --check-envs`` / ``mtrl eval`` and the conformance suite.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mtrl.cli import main
from mtrl.plugins import Plugins, hookimpl, load_plugins
from mtrl.plugins.builtin.mission_envs import CHARSET, COLOURS, make_go_to_door
from mtrl.testing import check_env
from mtrl.token_space import TokenSpace

ENV = "texty/GoToDoor-v0"
RANDOM_RETURN = 1 / 3


@pytest.fixture
def texty(monkeypatch: pytest.MonkeyPatch) -> Plugins:
    """The built-in plugins plus ``texty``, as the process-wide set the CLI uses."""

    @hookimpl
    def mtrl_register_envs(register: Any) -> None:
        register.env("GoToDoor-v0", make_go_to_door, description="go to the door named")

    plugins = load_plugins(
        autoload=False,
        extra={"texty": types.SimpleNamespace(mtrl_register_envs=mtrl_register_envs)},
    )
    monkeypatch.setattr("mtrl.plugins.manager._CACHED", plugins)
    return plugins


def _config(tmp_path: Path, steps: int) -> Path:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"name: mission\ntotal_env_steps: {steps}\nseed: 1\n"
        "tasks:\n"
        f"  - env: {ENV}\n"
        "    num_envs: 8\n"
        "actors: {mode: serial}\n"
        "learner: {batch_size: 1, unroll_length: 8, learning_rate: 0.002, lr_schedule: constant, "
        "model: {encoder_dim: 32, torso: [32]}}\n"
        f"tracking: {{run_dir: {tmp_path / 'runs'}, console: quiet, log_every_s: 60, "
        "csv: false, wandb: {mode: disabled}, final_eval_episodes: 60}\n"
    )
    return cfg


def test_the_env_boundary_hands_actors_token_ids(texty: Plugins) -> None:
    spec = texty.envs.get(ENV)
    mission = spec.observation_space["mission"]
    assert isinstance(mission, TokenSpace) and mission.charset == CHARSET
    env = spec.build(num_envs=4, seed=0)
    try:
        assert env.single_observation_space == spec.observation_space
        obs = env.reset()
        assert obs["mission"].dtype == np.int32 and obs["mission"].shape == (4, 24)
        assert obs["image"].shape == (4, 7, 7, 3)
        words = {"".join(CHARSET[i - 1] for i in row if i) for row in obs["mission"]}
        assert words <= {f"go to the {c} door" for c in COLOURS}
    finally:
        env.close()


def test_mission_env_passes_the_conformance_suite_and_validate(
    texty: Plugins, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = check_env(ENV, steps=20)
    assert {"build", "trainable", "spaces", "auto-reset", "seeding"} <= set(report.checks)
    assert main(["validate", "--check-envs", str(_config(tmp_path, 1000))]) == 0
    assert "ok (1 task" in capsys.readouterr().out


def test_the_mission_word_is_learned_and_the_greedy_policy_evaluates(
    texty: Plugins, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`mtrl train` in serial mode, then the final greedy eval and `mtrl eval` on the
    checkpoint: both read the mission through the same tokenising boundary."""
    assert main(["train", str(_config(tmp_path, 12_000))]) == 0
    capsys.readouterr()
    (run_dir,) = (tmp_path / "runs").glob("mission__*")
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    trained, greedy = last[f"task/{ENV}/return"], last[f"eval/{ENV}/greedy_return"]
    assert trained >= 0.8, f"training return {trained} (random {RANDOM_RETURN:.2f})"
    assert greedy >= 0.9, f"greedy return {greedy} (random {RANDOM_RETURN:.2f})"
    args = ["eval", str(run_dir), "--greedy", "--episodes", "30", "--json"]
    assert main(args) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert np.mean(result["returns"]) >= 0.9, result["returns"]
