"""Tests of mtrl-minigrid: every level is offered, envs meet the batch-env contract, the
mission arrives as tokens the learner's text encoder reads, and a solved level is a success."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("mtrl_minigrid") is None:  # pragma: no cover - install hint
    pytest.skip(
        "mtrl-minigrid is not installed: pip install -e plugins_contrib/mtrl-minigrid",
        allow_module_level=True,
    )

import torch
from mtrl_minigrid.plugin import levels

from mtrl.config.learner import ModelConfig
from mtrl.learner.encoders import make_encoder
from mtrl.plugins import get_plugins, make_env
from mtrl.testing import check_env

LEVELS = ["BabyAI-GoToLocal-v0", "BabyAI-PickupLoc-v0", "MiniGrid-DoorKey-5x5-v0"]


def test_every_level_is_offered() -> None:
    info = get_plugins().infos["minigrid"]
    assert info.status == "ok", info.errors
    assert info.package == "mtrl-minigrid"
    assert sorted(info.envs) == [f"minigrid/{k}" for k in levels()]
    assert {f"minigrid/{k}" for k in LEVELS} <= set(info.envs)
    assert len(info.envs) > 50


@pytest.mark.parametrize("level", LEVELS)
def test_conformance(level: str) -> None:
    report = check_env(f"minigrid/{level}", num_envs=3, steps=120, env_kwargs={"max_steps": 20})
    assert report.episode_ends > 0


def test_the_mission_arrives_as_tokens_the_text_encoder_reads() -> None:
    spec = get_plugins().envs.get("minigrid/BabyAI-GoToLocal-v0")
    env = make_env("minigrid/BabyAI-GoToLocal-v0", num_envs=2, seed=3)
    obs = env.reset()
    assert set(obs) == {"image", "direction", "mission"}
    space = env.single_observation_space["mission"]
    mission = "".join(space.charset[i - 1] for i in obs["mission"][0] if i)
    assert mission.startswith("go to "), mission
    encoder = make_encoder(spec.observation_space, ModelConfig(encoder_dim=32))
    out = encoder({k: torch.as_tensor(v) for k, v in obs.items()})
    assert out.shape == (2, 32) and torch.isfinite(out).all()
    env.close()


def test_reaching_the_goal_is_a_success_and_timing_out_is_not() -> None:
    # MiniGrid-Empty-5x5: the agent starts at (1, 1) facing east, the goal is at (3, 3).
    env = make_env("minigrid/MiniGrid-Empty-5x5-v0", num_envs=1, seed=0)
    env.reset()
    forward, right = 2, 1
    for action in (forward, forward, right, forward):
        step = env.step(np.array([action]))
        assert not step.terminated[0]
    step = env.step(np.array([forward]))
    assert step.terminated[0] and step.reward[0] > 0 and step.success[0]
    env.close()
    env = make_env("minigrid/MiniGrid-Empty-5x5-v0", num_envs=1, seed=0, max_steps=3)
    env.reset()
    for _ in range(3):
        step = env.step(np.array([right]))
    assert step.truncated[0] and not step.success[0]
    env.close()


def test_the_image_is_bounded_by_its_indices_so_the_encoder_scales_it_to_one() -> None:
    """The image holds object, colour and state indices (at most 10, 5, 2): its declared
    bounds say so, every observation lies within them, and the encoder's scaled input reaches
    1 in each channel instead of staying below 10/255."""
    spec = get_plugins().envs.get("minigrid/BabyAI-GoToLocal-v0")
    image = spec.observation_space["image"]
    assert image.high[0, 0].tolist() == [10, 5, 2] and (image.low == 0).all()
    env = make_env("minigrid/BabyAI-GoToLocal-v0", num_envs=4, seed=0)
    obs = env.reset()
    rng = np.random.default_rng(0)
    seen = obs["image"].max(axis=(0, 1, 2))
    for _ in range(50):
        obs = env.step(rng.integers(0, 7, 4)).obs
        assert image.contains(obs["image"][0])
        seen = np.maximum(seen, obs["image"].max(axis=(0, 1, 2)))
    env.close()
    encoder = make_encoder(spec.observation_space, ModelConfig(encoder_dim=8))
    scale = next(m for m in encoder.modules() if hasattr(m, "inv_high")).inv_high
    scaled = seen * scale[0, 0].numpy()
    assert scaled[0] == pytest.approx(seen[0] / 10) and scaled.max() > 0.5
