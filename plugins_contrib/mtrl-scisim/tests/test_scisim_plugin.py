"""The scisim package is discovered through its entry point and registers sound metadata."""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("mtrl_scisim") is None:  # pragma: no cover - install hint
    pytest.skip(
        "mtrl-scisim is not installed: pip install -e plugins_contrib/mtrl-scisim",
        allow_module_level=True,
    )

import gymnasium as gym

from mtrl.plugins import get_plugins, make_env


def test_entry_point_is_discovered() -> None:
    info = get_plugins().infos["scisim"]
    assert info.status == "ok", info.errors
    assert info.package == "mtrl-scisim"
    assert sorted(info.envs) == ["scisim/epidemic", "scisim/heat1d", "scisim/outbreak-boundary"]


def test_registered_metadata() -> None:
    envs = get_plugins().envs
    heat, epi = envs.get("scisim/heat1d"), envs.get("scisim/epidemic")
    assert heat.stochastic is False and epi.stochastic is True
    assert heat.max_episode_steps == 200 and epi.max_episode_steps == 365
    assert heat.random_score is not None and heat.random_score < 0
    assert epi.random_score is not None and -2 < epi.random_score < 0
    assert heat.action_space == gym.spaces.Box(-1.0, 1.0, (4,), "float32")
    assert heat.observation_space.shape == (33,)
    assert epi.action_space == gym.spaces.Discrete(3)


def test_kwargs_reach_the_env() -> None:
    heat = make_env("scisim/heat1d", num_envs=2, seed=0, n_heaters=6, n_sensors=8, horizon=5)
    assert heat.single_action_space.shape == (6,)
    assert heat.single_observation_space.shape == (17,)
    assert heat.horizon == 5
    epi = make_env("scisim/epidemic", num_envs=2, seed=0, method="tau_leap", population=50)
    assert epi.method == "tau_leap" and epi.population == 50
