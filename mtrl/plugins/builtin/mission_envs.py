"""Built-in plugin ``mission``: tasks whose goal is given as text (a ``gymnasium.spaces.Text``
part of a Dict observation, as in BabyAI/MiniGrid), for instruction-following runs.

``mission/GoToDoor-v0``: the observation is ``{"image": 7x7x3 uint8 noise, "mission": "go to
the {red|green|blue} door"}``; action ``i`` earns 1 when it names the mission's colour, else 0
(one step per episode: random play earns 1/3, an agent that reads the mission 1). The text is
tokenised at the env boundary (:mod:`mtrl.plugins.text`) and read by the learner's text
encoder; nothing in the image helps.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from mtrl.plugins import batch_env_from_gymnasium, hookimpl
from mtrl.plugins.batch_env import BatchEnv

COLOURS = ("red", "green", "blue")
CHARSET = "abcdefghijklmnopqrstuvwxyz "


class GoToDoorEnv(gym.Env):
    """One step: go to the door whose colour the mission names (reward 1, else 0)."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "image": spaces.Box(0, 10, (7, 7, 3), np.uint8),
                "mission": spaces.Text(24, charset=CHARSET),
            }
        )
        self.action_space = spaces.Discrete(len(COLOURS))
        self._colour = 0

    def _obs(self) -> dict[str, Any]:
        self._colour = int(self.np_random.integers(len(COLOURS)))
        image = self.np_random.integers(0, 11, (7, 7, 3), dtype=np.uint8)
        return {"image": image, "mission": f"go to the {COLOURS[self._colour]} door"}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action: int) -> tuple:
        reward = float(int(action) == self._colour)
        return self._obs(), reward, True, False, {}


def make_go_to_door(num_envs: int, seed: int = 0) -> BatchEnv:
    """``num_envs`` copies of :class:`GoToDoorEnv`."""
    return batch_env_from_gymnasium(GoToDoorEnv, num_envs, seed)


@hookimpl
def mtrl_register_envs(register: Any) -> None:
    """Offer ``GoToDoor-v0``."""
    register.env(
        "GoToDoor-v0",
        make_go_to_door,
        description="go to the door the text mission names (Dict image + Text mission)",
        stochastic=True,
        random_score=1 / 3,
        reference_score=1.0,
    )
