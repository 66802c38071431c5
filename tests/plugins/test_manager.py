"""Plugin loading: built-ins, in-process plugins, and isolation of broken plugins."""

from __future__ import annotations

import types

import gymnasium as gym
import numpy as np
import pytest

from mtrl.errors import PluginUnavailable, UnknownEnvError
from mtrl.plugins import batch_env_from_gymnasium, hookimpl, load_plugins
from mtrl.plugins.manager import BUILTIN_PLUGINS


def _plugin(**hooks: object) -> types.SimpleNamespace:
    return types.SimpleNamespace(**hooks)


def _good(register):
    register.env(
        "Toy-v0",
        lambda num_envs, seed: batch_env_from_gymnasium(
            lambda: gym.make("CartPole-v1"), num_envs, seed
        ),
        description="toy",
        random_score=0.0,
        reference_score=100.0,
    )


def test_builtins_load_and_offer_gymnasium_envs() -> None:
    plugins = load_plugins(autoload=False)
    assert set(BUILTIN_PLUGINS) <= set(plugins.infos)
    info = plugins.infos["gymnasium"]
    assert info.status == "ok", info.errors
    assert info.hooks == ["mtrl_register_envs"]
    assert "gymnasium/CartPole-v1" in plugins.envs
    assert "gymnasium/ALE/Pong-v5" in plugins.envs  # ale-py registers through gymnasium
    spec = plugins.envs.get("gymnasium/CartPole-v1")
    assert spec.plugin == "gymnasium" and spec.max_episode_steps == 500
    assert spec.observation_space.shape == (4,)
    assert spec.normalized_score(475.0) == pytest.approx(1.0)


def test_in_process_plugin_is_namespaced_and_builds() -> None:
    plugins = load_plugins(
        autoload=False, extra={"toys": _plugin(mtrl_register_envs=hookimpl(_good))}
    )
    assert plugins.infos["toys"].status == "ok"
    assert plugins.infos["toys"].envs == ["toys/Toy-v0"]
    env = plugins.envs.get("toys/Toy-v0").build(num_envs=2, seed=1)
    assert env.reset().shape == (2, 4)
    env.close()


def test_raising_plugin_is_reported_and_others_still_load() -> None:
    def broken(register):
        raise RuntimeError("simulator licence not found")

    plugins = load_plugins(
        autoload=False,
        extra={
            "broken": _plugin(mtrl_register_envs=hookimpl(broken)),
            "toys": _plugin(mtrl_register_envs=hookimpl(_good)),
        },
    )
    info = plugins.infos["broken"]
    assert info.status == "error"
    assert "RuntimeError: simulator licence not found" in info.errors[0]
    assert "test_manager.py" in info.errors[0]  # says where it raised
    assert plugins.infos["toys"].status == "ok"
    assert plugins.infos["gymnasium"].status == "ok"


def test_garbage_registrations_are_rejected_one_by_one() -> None:
    def mixed(register):
        register.env("bad name!", lambda num_envs, seed: None)
        register.env("NotCallable-v0", 42)
        register.env("BadSpace-v0", lambda num_envs, seed: None, observation_space=(4,))
        register.env("BadCost-v0", lambda num_envs, seed: None, step_cost_s=float("nan"))
        _good(register)

    plugins = load_plugins(
        autoload=False, extra={"mixed": _plugin(mtrl_register_envs=hookimpl(mixed))}
    )
    info = plugins.infos["mixed"]
    assert info.status == "error"
    assert len(info.errors) == 4
    assert any("'bad name!'" in e for e in info.errors)
    assert any("make must be callable" in e for e in info.errors)
    assert any("observation_space must be a gymnasium.Space" in e for e in info.errors)
    assert any("step_cost_s must be a finite number" in e for e in info.errors)
    assert info.envs == ["mixed/Toy-v0"]  # the good one survives


def test_hook_returning_data_is_a_contract_violation() -> None:
    def returns(register):
        return [{"id": "x"}]

    plugins = load_plugins(
        autoload=False, extra={"ret": _plugin(mtrl_register_envs=hookimpl(returns))}
    )
    assert plugins.infos["ret"].status == "error"
    assert "must call register.env" in plugins.infos["ret"].errors[0]


def test_misspelt_hook_and_wrong_argument_are_rejected() -> None:
    def typo(register):
        pass

    def wrong_arg(registrar):
        pass

    plugins = load_plugins(
        autoload=False,
        extra={
            "typo": _plugin(mtrl_register_env=hookimpl(typo)),
            "wrongarg": _plugin(mtrl_register_envs=hookimpl(wrong_arg)),
        },
    )
    assert plugins.infos["typo"].status == "error"
    assert "unknown hook" in plugins.infos["typo"].errors[0]
    assert plugins.infos["wrongarg"].status == "error"
    assert "registrar" in plugins.infos["wrongarg"].errors[0]
    assert plugins.infos["gymnasium"].status == "ok"


def test_unavailable_plugin_is_not_an_error() -> None:
    def missing(register):
        raise PluginUnavailable("needs foosim: pip install foosim")

    plugins = load_plugins(
        autoload=False, extra={"foo": _plugin(mtrl_register_envs=hookimpl(missing))}
    )
    assert plugins.infos["foo"].status == "unavailable"
    assert plugins.infos["foo"].errors == ["needs foosim: pip install foosim"]


def test_duplicate_ids_within_a_plugin_keep_the_first() -> None:
    def twice(register):
        _good(register)
        _good(register)

    plugins = load_plugins(
        autoload=False, extra={"twice": _plugin(mtrl_register_envs=hookimpl(twice))}
    )
    assert plugins.infos["twice"].envs == ["twice/Toy-v0"]
    assert "already registered" in plugins.infos["twice"].errors[0]


def test_disable_env_var_skips_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MTRL_DISABLE_PLUGINS", "gymnasium, envpool")
    plugins = load_plugins(autoload=False)
    assert plugins.infos["gymnasium"].status == "disabled"
    assert plugins.infos["envpool"].status == "disabled"
    assert "gymnasium/CartPole-v1" not in plugins.envs


def test_unknown_id_suggests_the_namespaced_one() -> None:
    plugins = load_plugins(autoload=False)
    with pytest.raises(UnknownEnvError, match="did you mean 'gymnasium/CartPole-v1'"):
        plugins.envs.get("CartPole-v1")
    with pytest.raises(UnknownEnvError, match="did you mean 'gymnasium/CartPole-v1'"):
        plugins.envs.get("gymnasium/CartPol-v1")


def test_build_checks_what_the_factory_returns() -> None:
    def lying(register):
        register.env("Wrong-v0", lambda num_envs, seed: np.zeros(3))
        register.env(
            "Short-v0",
            lambda num_envs, seed: batch_env_from_gymnasium(
                lambda: gym.make("CartPole-v1"), 1, seed
            ),
        )

    plugins = load_plugins(
        autoload=False, extra={"lying": _plugin(mtrl_register_envs=hookimpl(lying))}
    )
    with pytest.raises(Exception, match="lying/Wrong-v0: plugin 'lying' returned ndarray"):
        plugins.envs.get("lying/Wrong-v0").build(num_envs=2)
    with pytest.raises(Exception, match="asked for 4 envs, got 1"):
        plugins.envs.get("lying/Short-v0").build(num_envs=4)
    with pytest.raises(Exception, match="lying/Short-v0: cannot build with"):
        plugins.envs.get("lying/Short-v0").build(num_envs=1, colour="red")
