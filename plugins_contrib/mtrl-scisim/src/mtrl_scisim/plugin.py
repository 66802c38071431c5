"""The mtrl plugin: registers ``scisim/heat1d``, ``scisim/epidemic`` and
``scisim/outbreak-boundary`` (steering an ensemble of epidemics, :mod:`mtrl_scisim.steer`).

Registration only builds gymnasium spaces; the simulators are imported when an env is built.
``heat1d``'s spaces depend on its kwargs (``n_heaters``, ``n_sensors``), so they are not
declared up front and mtrl finds them by building one copy with the defaults.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from mtrl.plugins import BatchEnv, EnvRegistrar, hookimpl

HEAT_HORIZON = 200
EPIDEMIC_HORIZON = 365

#: Mean undiscounted return of a uniformly random policy with default kwargs, measured by
#: ``.venv/bin/python plugins_contrib/mtrl-scisim/scripts/measure_random_scores.py`` (1000
#: episodes each, seed 0; standard errors 1.6 and 0.003, see README).
RANDOM_SCORES: dict[str, float] = {"heat1d": -48.01, "epidemic": -1.053}


def make_heat1d(num_envs: int, seed: int = 0, **kwargs: Any) -> BatchEnv:
    """Build ``num_envs`` heated rods (kwargs: see :class:`mtrl_scisim.heat.Heat1DBatchEnv`)."""
    from mtrl_scisim.heat import Heat1DBatchEnv

    kwargs.setdefault("horizon", HEAT_HORIZON)
    return Heat1DBatchEnv(num_envs, seed, **kwargs)


def make_epidemic(num_envs: int, seed: int = 0, **kwargs: Any) -> BatchEnv:
    """Build ``num_envs`` SIR epidemics (kwargs: :class:`mtrl_scisim.epidemic.EpidemicBatchEnv`)."""
    from mtrl_scisim.epidemic import EpidemicBatchEnv

    kwargs.setdefault("horizon", EPIDEMIC_HORIZON)
    return EpidemicBatchEnv(num_envs, seed, **kwargs)


def make_outbreak_boundary(num_envs: int, seed: int = 0, **kwargs: Any) -> BatchEnv:
    """Build ``num_envs`` outbreak studies (kwargs: :class:`mtrl_scisim.steer.
    OutbreakBoundaryBatchEnv` and :class:`mtrl_scisim.steer.OutbreakStudy`)."""
    from mtrl_scisim.steer import OutbreakBoundaryBatchEnv

    return OutbreakBoundaryBatchEnv(num_envs, seed, **kwargs)


@hookimpl
def mtrl_register_envs(register: EnvRegistrar) -> None:
    """Offer the heat-equation control task and the SIR epidemic task."""
    register.env(
        "heat1d",
        make_heat1d,
        description=(
            "1-D heat equation u_t = alpha u_xx + sum_k a_k b_k(x), Dirichlet ends; drive the "
            "rod to a random target with K Gaussian heaters (grid size n, Crank-Nicolson)"
        ),
        stochastic=False,  # deterministic dynamics; only the target and start are random
        random_score=RANDOM_SCORES.get("heat1d"),
        max_episode_steps=HEAT_HORIZON,
    )
    register.env(
        "epidemic",
        make_epidemic,
        observation_space=gym.spaces.Box(0.0, 1.0, (4,), np.float32),
        action_space=gym.spaces.Discrete(3),
        description=(
            "stochastic SIR epidemic (exact Gillespie SSA or tau-leaping), one day per step; "
            "actions: none / distancing / lockdown"
        ),
        stochastic=True,
        random_score=RANDOM_SCORES.get("epidemic"),
        max_episode_steps=EPIDEMIC_HORIZON,
    )
    register.env(
        "outbreak-boundary",
        make_outbreak_boundary,
        description=(
            "steer an ensemble of SIR epidemics: choose the (R0, I0) of the next runs to map "
            "where a major outbreak is more likely than not; reward: the drop in misclassified "
            "area"
        ),
        stochastic=True,
    )
