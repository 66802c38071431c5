"""One trainability contract: the spaces `mtrl train` can learn from are exactly those that
`mtrl validate --check-envs` and the conformance suite accept.

Real envs only: gymnasium's Blackjack-v1 (a Tuple observation) and a tiny gymnasium env whose
Dict observation has a Sequence part (no encoder), registered in-process as plugin ``texty``.
Text parts train (tests/training/test_text_mission.py).
"""

from __future__ import annotations

import json
import math
import types
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.cli import main
from mtrl.config import ModelConfig
from mtrl.learner.encoders import make_encoder
from mtrl.learner.model import obs_to_tensor
from mtrl.learner.trainable import UnsupportedSpaceError, check_trainable
from mtrl.plugins import Plugins, batch_env_from_gymnasium, hookimpl, load_plugins
from mtrl.testing import ConformanceError, check_env

BLACKJACK = "gymnasium/Blackjack-v1"
NOTES_ENV = "texty/Notes-v0"
NOTES_ERROR = "obs['notes']: Sequence spaces are not supported; supported: Box"


class NotesEnv(gym.Env):
    """Five steps along a line; the observation carries the position and notes (a Sequence)."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "pos": spaces.Box(0.0, 1.0, (1,), np.float32),
                "notes": spaces.Sequence(spaces.Discrete(3)),
            }
        )
        self.action_space = spaces.Discrete(2)
        self._t = 0

    def _obs(self) -> dict[str, Any]:
        return {"pos": np.array([self._t / 5], np.float32), "notes": (1, 2) * (self._t % 3)}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action: int) -> tuple:
        self._t += 1
        return self._obs(), float(action), self._t >= 5, False, {}


def _make_notes(num_envs: int, seed: int) -> Any:
    return batch_env_from_gymnasium(NotesEnv, num_envs, seed)


@pytest.fixture
def texty(monkeypatch: pytest.MonkeyPatch) -> Plugins:
    """The built-in plugins plus ``texty``, as the process-wide set the CLI uses."""

    @hookimpl
    def mtrl_register_envs(register: Any) -> None:
        register.env("Notes-v0", _make_notes)

    plugins = load_plugins(
        autoload=False,
        extra={"texty": types.SimpleNamespace(mtrl_register_envs=mtrl_register_envs)},
    )
    monkeypatch.setattr("mtrl.plugins.manager._CACHED", plugins)
    return plugins


def _config(tmp_path: Path, env: str, steps: int = 3000) -> Path:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"name: tiny\ntotal_env_steps: {steps}\n"
        "tasks:\n"
        "  - env: gymnasium/CartPole-v1\n"
        "    num_envs: 2\n"
        f"  - env: {env}\n"
        "    num_envs: 4\n"
        "actors: {mode: serial}\n"
        "learner: {batch_size: 4, unroll_length: 16, model: {encoder_dim: 32, torso: [32]}}\n"
        f"tracking: {{run_dir: {tmp_path / 'runs'}, console: quiet, log_every_s: 60, "
        "csv: false, wandb: {mode: disabled}, final_eval_episodes: 4}\n"
    )
    return cfg


def test_conformance_rejects_a_sequence_part_naming_it(texty: Plugins) -> None:
    with pytest.raises(ConformanceError) as err:
        check_env(texty.envs.get(NOTES_ENV), steps=50)
    assert str(err.value).startswith(f"{NOTES_ENV}: [trainable] {NOTES_ERROR}")
    assert "Dict or Tuple of these" in str(err.value)


def test_validate_check_envs_rejects_a_sequence_part_on_the_task_line(
    texty: Plugins, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, NOTES_ENV)
    assert main(["validate", str(cfg)]) == 0  # the schema alone cannot know
    capsys.readouterr()
    assert main(["validate", "--check-envs", str(cfg)]) == 2
    (line,) = capsys.readouterr().err.splitlines()  # one problem: CartPole (tasks[0]) is fine
    assert line.startswith(f"{cfg}:6: tasks[1].env: {NOTES_ENV}: {NOTES_ERROR}")


def test_validate_check_envs_names_the_line_of_bad_env_kwargs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "kw.yaml"
    cfg.write_text("tasks:\n  - env: gymnasium/CartPole-v1\n\n    env_kwargs: {colour: red}\n")
    assert main(["validate", "--check-envs", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{cfg}:4: tasks[0].env_kwargs: cannot build gymnasium/CartPole-v1")


def test_train_rejects_a_sequence_part_before_starting(
    texty: Plugins, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", str(_config(tmp_path, NOTES_ENV))]) == 2
    err = capsys.readouterr().err
    assert f"error: tasks[1].env: {NOTES_ENV}: {NOTES_ERROR}" in err
    assert "Traceback" not in err and "task 1 encoder" not in err


def test_blackjack_tuple_observation_passes_every_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = check_env(BLACKJACK, steps=100, spawn=False)
    assert "trainable" in report.checks and "spaces" in report.checks
    assert main(["validate", "--check-envs", str(_config(tmp_path, BLACKJACK))]) == 0
    assert "ok (2 tasks" in capsys.readouterr().out


def test_blackjack_trains_and_its_greedy_policy_evaluates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Tuple observation (three Discrete parts) beside CartPole: a few thousand steps of real
    training, the final greedy eval, then `mtrl eval --greedy` on the checkpoint."""
    assert main(["train", str(_config(tmp_path, BLACKJACK, steps=4000))]) == 0
    capsys.readouterr()
    (run_dir,) = (tmp_path / "runs").glob("tiny__*")
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["charts/updates"] >= 20
    assert last[f"task/{BLACKJACK}/env_steps"] >= 1000
    assert math.isfinite(last[f"learner/{BLACKJACK}/entropy"])
    assert -1.0 <= last[f"eval/{BLACKJACK}/greedy_return"] <= 1.0  # rewards are -1, 0, 1
    args = ["eval", str(run_dir), "--greedy", "--episodes", "5", "--json", "--tasks", BLACKJACK]
    assert main(args) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["mode"] == "greedy" and len(result["returns"]) == 5
    assert set(result["returns"]) <= {-1.0, 0.0, 1.0}


CFG = ModelConfig(encoder_dim=8, torso=[8])


def test_dict_encoder_keeps_its_parameter_names() -> None:
    """Checkpoints of Dict-observation runs must still load: names are pinned here."""
    space = spaces.Dict(
        {
            "img": spaces.Box(0, 255, (4, 10, 10), np.uint8),
            "cell": spaces.Discrete(5),
            "action_mask": spaces.MultiBinary(3),
        }
    )
    assert list(make_encoder(space, CFG).state_dict()) == [
        *(f"parts.cell.mlp.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")),
        *(f"parts.img.{m}.0.{p}" for m in ("conv", "out") for p in ("weight", "bias")),
        "out.0.weight",
        "out.0.bias",
    ]


def test_tuple_encoder_has_one_part_per_element_and_takes_tuples_or_dicts() -> None:
    space = spaces.Tuple((spaces.Discrete(32), spaces.Box(0, 10, (2,), np.int64)))
    encoder = make_encoder(space, CFG)
    assert sorted(encoder.parts) == ["0", "1"] and "out.0.weight" in encoder.state_dict()
    assert torch.allclose(encoder.parts["1"].prep.inv_high, torch.full((2,), 0.1))
    rows = (np.array([3, 31]), np.array([[0, 10], [5, 5]]))
    as_tuple = encoder(tuple(torch.as_tensor(r) for r in rows))
    as_dict = encoder(obs_to_tensor(rows))
    assert as_tuple.shape == (2, 8) and torch.equal(as_tuple, as_dict)


@pytest.mark.parametrize(
    ("obs", "act", "error"),
    [
        (
            spaces.Tuple((spaces.Discrete(2), spaces.Graph(spaces.Discrete(3), None))),
            spaces.Discrete(2),
            "obs[1]: Graph",
        ),
        (spaces.Sequence(spaces.Discrete(2)), spaces.Discrete(2), "obs: Sequence spaces"),
        (spaces.Discrete(3), spaces.Tuple((spaces.Discrete(2),)), "action: Tuple action"),
        (spaces.Box(0, 255, (1, 2, 2), np.uint8), spaces.Discrete(2), "obs: image (1, 2, 2)"),
        (
            spaces.Dict({"x": spaces.Discrete(3), "action_mask": spaces.MultiBinary(3)}),
            spaces.Discrete(4),
            "obs['action_mask']: the model fails on sampled observations: ValueError: "
            "action_mask has 3 entries per step, expected 4",
        ),
    ],
)
def test_check_trainable_names_the_part_it_cannot_train_on(
    obs: spaces.Space, act: spaces.Space, error: str
) -> None:
    with pytest.raises(UnsupportedSpaceError) as err:
        check_trainable(obs, act, CFG)
    assert str(err.value).startswith(error)


def test_the_check_leaves_the_global_torch_rng_alone() -> None:
    """``train`` checks the spaces after seeding torch: the check must not shift the run's
    model initialisation."""
    from gymnasium import spaces

    from mtrl.learner.trainable import check_trainable

    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    check_trainable(spaces.Box(-1, 1, (4,)), spaces.Discrete(2))
    torch.testing.assert_close(torch.rand(3), expected)
