"""Spaces whose samples are strings but that are not ``gymnasium.spaces.Text`` (MiniGrid's
``MissionSpace``, a plugin's own) are text observations: tokenised at the env boundary with
the default charset and length, and embedded by the learner's text encoder."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from mtrl.config.learner import ModelConfig
from mtrl.learner.encoders import make_encoder
from mtrl.plugins import batch_env_from_gymnasium
from mtrl.plugins.text import tokenise_text_observations
from mtrl.token_space import (
    STRING_CHARSET,
    STRING_MAX_LENGTH,
    TokenSpace,
    has_text,
    is_string_space,
    tokenised_space,
)

MISSIONS = ("go to the red ball", "pick up the blue key")


class WordSpace(gym.Space):
    """Like MiniGrid's MissionSpace: samples are strings, no charset or length declared."""

    def __init__(self) -> None:
        super().__init__(None, None)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return MISSIONS[int(self.np_random.integers(len(MISSIONS)))]

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WordSpace)

    __hash__ = None  # type: ignore[assignment]


class MissionEnv(gym.Env):
    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {"image": spaces.Box(0, 1, (3,), np.float32), "mission": WordSpace()}
        )
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return {"image": np.zeros(3, np.float32), "mission": MISSIONS[0]}, {}

    def step(self, action: int) -> tuple:
        return {"image": np.ones(3, np.float32), "mission": MISSIONS[1]}, 1.0, True, False, {}


def test_a_space_is_text_when_its_samples_are_strings_and_only_then() -> None:
    space = WordSpace()
    state = space.np_random.bit_generator.state
    assert is_string_space(space) and is_string_space(spaces.Text(5))
    assert space.np_random.bit_generator.state == state, "probed on a copy"
    for other in (spaces.Box(0, 1, (2,)), spaces.Discrete(3), spaces.Dict({"a": WordSpace()})):
        assert not is_string_space(other)
    assert has_text(spaces.Dict({"a": spaces.Discrete(2), "m": WordSpace()}))
    tokens = tokenised_space(spaces.Dict({"m": WordSpace()}))["m"]
    assert tokens == TokenSpace(STRING_CHARSET, STRING_MAX_LENGTH)


def test_string_observations_arrive_as_tokens_and_the_encoder_reads_them() -> None:
    env = tokenise_text_observations(batch_env_from_gymnasium(MissionEnv, 2, seed=0))
    space = env.single_observation_space["mission"]
    assert isinstance(space, TokenSpace) and space.max_length == STRING_MAX_LENGTH
    obs = env.reset()
    ids = obs["mission"]
    assert ids.shape == (2, STRING_MAX_LENGTH) and ids.dtype == np.int32
    first = "".join(STRING_CHARSET[i - 1] for i in ids[0] if i)
    assert first == MISSIONS[0]
    encoder = make_encoder(MissionEnv().observation_space, ModelConfig(encoder_dim=16))
    out = encoder({k: torch.as_tensor(v) for k, v in obs.items()})
    assert out.shape == (2, 16) and torch.isfinite(out).all()
    env.close()
