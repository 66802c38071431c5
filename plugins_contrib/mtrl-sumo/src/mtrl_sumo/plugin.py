"""The mtrl plugin: registers ``sumo/grid3x3-v0``, one agent slot per intersection.

The env is :class:`mtrl_sumo.traffic.TrafficGrid`, a pettingzoo parallel env, seen by mtrl
through :func:`mtrl.plugins.batch_env_from_pettingzoo`: ``num_envs`` counts intersections, so it
is a multiple of 9 (9 slots per simulation). All slots of a simulation end together.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from mtrl.plugins import BatchEnv, EnvRegistrar, PluginUnavailable, hookimpl

ENV_ID = "sumo/grid3x3-v0"

#: Mean return per intersection and episode (1800 s, demand seeds 0-19) of uniform random
#: actions and of SUMO's actuated programs, from ``python -m mtrl_sumo.baselines --seeds 20``
#: (README.md): an mtrl normalised score of 1 matches the actuated signals.
RANDOM_SCORE = -222.4
ACTUATED_SCORE = -75.5


def make_grid(num_envs: int, seed: int = 0, **kwargs: Any) -> BatchEnv:
    """``num_envs`` intersection slots: ``num_envs / 9`` SUMO simulations of the grid."""
    from mtrl.plugins import batch_env_from_pettingzoo
    from mtrl_sumo.traffic import TrafficGrid

    TrafficGrid(**kwargs)  # bad kwargs fail here, before a SUMO worker starts
    return batch_env_from_pettingzoo(lambda: TrafficGrid(**kwargs), num_envs, seed, ENV_ID)


@hookimpl
def mtrl_register_envs(register: EnvRegistrar) -> None:
    """Offer the grid when SUMO (the ``eclipse-sumo`` wheel), TraCI and pettingzoo are here."""
    missing = [m for m in ("sumo", "libsumo", "pettingzoo") if importlib.util.find_spec(m) is None]
    if missing:
        raise PluginUnavailable(
            f"sumo needs {missing}: pip install eclipse-sumo libsumo pettingzoo"
        )
    from mtrl_sumo.traffic import TrafficGrid

    probe = TrafficGrid()
    register.env(
        "grid3x3-v0",
        make_grid,
        observation_space=probe.observation_space(probe.possible_agents[0]),
        action_space=probe.action_space(probe.possible_agents[0]),
        description=(
            "SUMO traffic signals of a 3x3 grid, one slot per intersection (num_envs: "
            "multiple of 9); reward: minus vehicle-minutes halted"
        ),
        stochastic=True,
        max_episode_steps=probe.num_seconds // probe.delta_time,
        num_envs_multiple=len(probe.possible_agents),
        random_score=RANDOM_SCORE,
        reference_score=ACTUATED_SCORE,
    )
