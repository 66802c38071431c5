"""The mtrl plugin: registers ``minigrid/<level>`` for every MiniGrid and BabyAI level.

The levels are the gymnasium ids MiniGrid registers (``MiniGrid-*``, ``BabyAI-*``), found by
importing it; their observation space (image, direction, mission) is read from one env the
first time a run needs it. Without MiniGrid installed the plugin is listed as unavailable.
"""

from __future__ import annotations

import importlib.util
from functools import partial

import gymnasium as gym
from gymnasium import spaces

from mtrl.errors import PluginUnavailable
from mtrl.plugins import EnvRegistrar, hookimpl
from mtrl_minigrid.env import make_level

PREFIXES = ("MiniGrid-", "BabyAI-")
ACTIONS = 7  # left, right, forward, pickup, drop, toggle, done: every level's Discrete(7)


def levels() -> list[str]:
    """Gymnasium ids of MiniGrid's and BabyAI's levels, sorted."""
    import minigrid  # noqa: F401  (registers the levels with gymnasium)

    return sorted(k for k in gym.registry if k.startswith(PREFIXES))


@hookimpl
def mtrl_register_envs(register: EnvRegistrar) -> None:
    """Offer ``minigrid/<level>`` for each MiniGrid and BabyAI level."""
    if importlib.util.find_spec("minigrid") is None:
        raise PluginUnavailable("MiniGrid is not installed: pip install minigrid")
    for level in levels():
        kind = "BabyAI" if level.startswith("BabyAI-") else "MiniGrid"
        register.env(
            level,
            partial(make_level, level=level),
            action_space=spaces.Discrete(ACTIONS),
            description=(
                f"{kind} {level}: 7x7x3 partial view, direction and the mission as text; "
                "7 actions; success flag"
            ),
            stochastic=True,
            random_score=None,
            reference_score=None,
        )
