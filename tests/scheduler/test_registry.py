"""Policies as plugins: built-ins through the hook, third parties alongside, isolation."""

from __future__ import annotations

import types

import pytest

from mtrl.errors import PluginError
from mtrl.plugins import hookimpl, load_plugins
from mtrl.plugins.scheduler_registrar import UnknownPolicyError
from mtrl.scheduler import Allocation, Budget, TaskRecord, balanced, fixed, get_policy, progress
from mtrl.scheduler.registry import policy_names


@pytest.fixture(autouse=True)
def _only_scheduler_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip the env backends: these tests only need the scheduling policies (and speed)."""
    monkeypatch.setenv("MTRL_DISABLE_PLUGINS", "gymnasium,envpool,pettingzoo,tensor")


def _all_to_first(records, budget):
    names = [r.name for r in records]
    return Allocation({n: (budget.slots if i == 0 else 0) for i, n in enumerate(names)})


def _plugin(register_fn) -> types.SimpleNamespace:
    return types.SimpleNamespace(mtrl_register_schedulers=hookimpl(register_fn))


def test_builtins_register_through_the_hook() -> None:
    plugins = load_plugins(autoload=False)
    info = plugins.infos["scheduler"]
    assert info.status == "ok", info.errors
    assert info.hooks == ["mtrl_register_schedulers"]
    assert info.schedulers == ["fixed", "balanced", "progress"]
    assert policy_names(plugins) == ["fixed", "balanced", "progress"]
    for name, policy in [("fixed", fixed), ("balanced", balanced), ("progress", progress)]:
        assert get_policy(name, plugins).__wrapped__ is policy
    assert plugins.schedulers.get("balanced").description


def test_third_party_policy_is_offered_and_usable() -> None:
    def register(register):
        register.policy("greedy", _all_to_first, description="everything to the first task")

    plugins = load_plugins(autoload=False, extra={"mine": _plugin(register)})
    assert plugins.infos["mine"].status == "ok"
    assert plugins.infos["mine"].schedulers == ["greedy"]
    policy = get_policy("greedy", plugins)
    alloc = policy([TaskRecord("a", 1.0), TaskRecord("b", 1.0)], Budget(4, min_per_task=0))
    assert dict(alloc) == {"a": 4, "b": 0}


def test_unknown_policy_names_the_closest() -> None:
    plugins = load_plugins(autoload=False)
    with pytest.raises(UnknownPolicyError, match="did you mean 'balanced'"):
        get_policy("balance", plugins)


def test_bad_registrations_are_rejected_and_others_still_load() -> None:
    def mixed(register):
        register.policy("fixed", _all_to_first)  # taken by the built-in
        register.policy("bad name!", _all_to_first)
        register.policy("notcallable", 3)
        register.policy("one_arg", lambda records: None)
        register.policy("good", _all_to_first)

    def broken(register):
        raise RuntimeError("solver licence missing")

    def returns(register):
        return {"x": _all_to_first}

    plugins = load_plugins(
        autoload=False,
        extra={
            "mixed": _plugin(mixed),
            "broken": _plugin(broken),
            "returns": _plugin(returns),
        },
    )
    errors = plugins.infos["mixed"].errors
    assert any("already registered by plugin 'scheduler'" in e for e in errors)
    assert any("'bad name!'" in e and "name must" in e for e in errors)
    assert any("'notcallable'" in e and "must be callable" in e for e in errors)
    assert any("'one_arg'" in e and "two positional" in e for e in errors)
    assert plugins.infos["mixed"].schedulers == ["good"]
    assert get_policy("fixed", plugins).__wrapped__ is fixed  # the built-in kept its name
    assert "RuntimeError: solver licence missing" in plugins.infos["broken"].errors[0]
    assert "must call register.policy" in plugins.infos["returns"].errors[0]
    assert plugins.infos["scheduler"].status == "ok"
    assert set(policy_names(plugins)) == {"fixed", "balanced", "progress", "good"}


@pytest.mark.parametrize(
    ("returned", "problem"),
    [
        ([4, 0], "not an Allocation"),
        ({"a": 4}, "missing {'b'}"),
        ({"a": 3, "b": 0}, "allocated 3 actors, the budget is 4"),
        ({"a": 4.0, "b": 0}, "non-negative integers: a"),
        ({"a": 0, "b": 4}, "below the floor of 1: a"),
        (Allocation({"a": 2, "b": 2}, shares={"c": 0.5}), "shares name unknown tasks: c"),
        (Allocation({"a": 2, "b": 2}, shares={"a": float("nan")}), "finite and >= 0: a"),
        (Allocation({"a": 2, "b": 2}, shares={"b": -0.1}), "finite and >= 0: b"),
    ],
)
def test_a_policy_breaking_its_contract_is_named(returned: object, problem: str) -> None:
    def register(register):
        register.policy("sloppy", lambda records, budget: returned)

    plugins = load_plugins(autoload=False, extra={"mine": _plugin(register)})
    policy = get_policy("sloppy", plugins)
    records = [TaskRecord("a", 1.0), TaskRecord("b", 1.0)]
    with pytest.raises(PluginError, match="policy 'sloppy' of plugin 'mine'") as err:
        policy(records, Budget(4, min_per_task=1))
    assert problem in str(err.value)


def test_plain_mappings_with_numpy_counts_are_accepted() -> None:
    import numpy as np

    def register(register):
        register.policy("np", lambda records, budget: {"a": np.int64(3), "b": np.int64(1)})

    plugins = load_plugins(autoload=False, extra={"mine": _plugin(register)})
    alloc = get_policy("np", plugins)([TaskRecord("a", 1.0), TaskRecord("b", 1.0)], Budget(4))
    assert isinstance(alloc, Allocation) and dict(alloc) == {"a": 3, "b": 1}
