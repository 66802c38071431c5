"""The mtrl plugin: registers one env id per MinAtar game.

Registration is cheap: spaces come from a static table and MinAtar is imported only when an
env is built. Without MinAtar installed the plugin is listed as unavailable.
"""

from __future__ import annotations

import importlib.util
from functools import partial
from typing import Any

from mtrl.errors import PluginUnavailable
from mtrl.plugins import BatchEnv, EnvRegistrar, hookimpl
from mtrl_minatar.env import GAMES, MinAtarBatchEnv, action_space, observation_space

DEFAULT_MAX_EPISODE_STEPS = 10_000

#: Mean undiscounted return of a uniformly random policy over the minimal action set, with the
#: default kwargs (sticky_action_prob=0.1, difficulty ramping, 10_000-step limit); measured by
#: ``.venv/bin/python plugins_contrib/mtrl-minatar/scripts/measure_random_scores.py`` (1000
#: episodes per game, seed 0; standard errors 0.01-0.10, see README).
RANDOM_SCORES: dict[str, float] = {
    "asterix": 0.492,
    "breakout": 0.378,
    "freeway": 0.361,
    "seaquest": 0.095,
    "space_invaders": 4.115,
}


def make_minatar(num_envs: int, seed: int = 0, *, game: str, **kwargs: Any) -> BatchEnv:
    """Build ``num_envs`` copies of MinAtar ``game``.

    Keyword arguments: ``sticky_action_prob`` (0.1), ``difficulty_ramping`` (True),
    ``max_episode_steps`` (10_000; None for no limit), ``copy`` (True).
    """
    kwargs.setdefault("max_episode_steps", DEFAULT_MAX_EPISODE_STEPS)
    return MinAtarBatchEnv(game, num_envs, seed, **kwargs)


@hookimpl
def mtrl_register_envs(register: EnvRegistrar) -> None:
    """Offer ``minatar/<game>`` for each of MinAtar's five games."""
    if importlib.util.find_spec("minatar") is None:
        raise PluginUnavailable("MinAtar is not installed: pip install MinAtar")
    for game in sorted(GAMES):
        channels, n_actions = GAMES[game]
        register.env(
            game,
            partial(make_minatar, game=game),
            observation_space=observation_space(game),
            action_space=action_space(game),
            description=(
                f"MinAtar {game}: {channels}x10x10 binary channels, {n_actions} actions, "
                "sticky actions p=0.1"
            ),
            stochastic=True,
            random_score=RANDOM_SCORES.get(game),
            reference_score=None,
            max_episode_steps=DEFAULT_MAX_EPISODE_STEPS,
        )
