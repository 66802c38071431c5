"""Trackers as plugins: registration (the built-in ones too), isolation, selection by config,
and failure reports."""

from __future__ import annotations

import logging
import types
from pathlib import Path
from typing import Any

import pytest

from mtrl.config import ExperimentConfig, parse_config
from mtrl.errors import ConfigError, PluginUnavailable
from mtrl.plugins import Plugins, get_plugins, hookimpl, load_plugins
from mtrl.plugins.tracker_registrar import UnknownTrackerError
from mtrl.tracking import JsonlSink, make_sinks, tracker_factories
from mtrl.tracking.builtin import BUILTIN_TRACKERS
from mtrl.tracking.console import PlainConsole
from mtrl.tracking.csv_sink import CsvSink
from mtrl.tracking.episodes import EpisodeCsvSink
from mtrl.tracking.tensorboard_sink import TensorboardSink

BUILTIN = list(BUILTIN_TRACKERS)


@pytest.fixture(autouse=True)
def _no_env_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip the env backends: these tests only need trackers (and speed)."""
    monkeypatch.setenv("MTRL_DISABLE_PLUGINS", "gymnasium,envpool,pettingzoo,tensor,chaos")


class Collect:
    """A sink that keeps what it is given."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.closed = False

    def write(self, record: dict[str, Any]) -> None:
        self.records.append(dict(record))

    def close(self) -> None:
        self.closed = True


class Exploding(Collect):
    def write(self, record: dict[str, Any]) -> None:
        raise OSError("dashboard unreachable")


def _plugin(register_fn: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(mtrl_register_trackers=hookimpl(register_fn))


def _cfg(trackers: list[str] | None = None) -> ExperimentConfig:
    tracking: dict[str, Any] = {"console": "quiet", "wandb": {"mode": "disabled"}}
    if trackers is not None:
        tracking["trackers"] = trackers
    return ExperimentConfig.model_validate(
        {"tasks": [{"env": "gymnasium/CartPole-v1"}], "tracking": tracking}
    )


def _two_trackers() -> tuple[Plugins, dict[str, Collect]]:
    made: dict[str, Collect] = {}

    def factory(name: str) -> Any:
        def make(cfg: ExperimentConfig, run_dir: Path | None, names: list[str]) -> Collect:
            made[name] = Collect()
            return made[name]

        return make

    def register(register):
        register.tracker("alpha", factory("alpha"), description="first")
        register.tracker("beta", factory("beta"))

    return load_plugins(autoload=False, extra={"mine": _plugin(register)}), made


def test_registered_trackers_are_listed_and_all_run_by_default() -> None:
    plugins, made = _two_trackers()
    info = plugins.infos["mine"]
    assert (info.status, info.hooks, info.trackers) == (
        "ok",
        ["mtrl_register_trackers"],
        ["alpha", "beta"],
    )
    assert plugins.trackers.names() == [*BUILTIN, "alpha", "beta"]  # built-ins load first
    assert plugins.trackers.get("alpha").description == "first"
    sinks = make_sinks(_cfg(), None, ["a"], trackers=tracker_factories(_cfg(), plugins))
    sinks.write({"charts/env_steps": 1})
    sinks.close()
    assert set(made) == {"alpha", "beta"}
    assert made["alpha"].records == [{"charts/env_steps": 1}] and made["beta"].closed


@pytest.mark.parametrize(
    ("chosen", "expected"), [(["beta"], ["beta"]), ([], []), (["beta", "csv", "beta"], ["beta"])]
)
def test_config_selects_plugin_trackers_and_built_ins_always_run(
    chosen: list[str], expected: list[str]
) -> None:
    """``tracking.trackers`` picks among plugins' trackers; the built-in ones run whatever it
    says (their own settings switch them), once even when listed."""
    plugins, _ = _two_trackers()
    factories = tracker_factories(_cfg(chosen), plugins)
    assert [f.spec.name for f in factories] == [*BUILTIN, *expected]  # type: ignore[attr-defined]


def test_unknown_tracker_names_the_closest() -> None:
    plugins, _ = _two_trackers()
    with pytest.raises(UnknownTrackerError, match="did you mean 'alpha'"):
        tracker_factories(_cfg(["alpah"]), plugins)
    text = "tasks:\n  - env: a/b\ntracking:\n  trackers:\n    - beta\n    - alpah\n"
    with pytest.raises(ConfigError) as err:
        parse_config(text, "exp.yaml", tracker_names=plugins.trackers.names())
    assert err.value.problems == [
        "exp.yaml:6: tracking.trackers[1]: unknown tracker 'alpah'; did you mean 'alpha'?"
    ]
    # Without the registry's names the config cannot know plugin trackers: taken on trust.
    assert parse_config(text).tracking.trackers == ["beta", "alpah"]


def test_raising_factory_and_write_are_reported_by_name_and_turned_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = Collect()
    bad = Exploding()

    def no_server(cfg: ExperimentConfig, run_dir: Path | None, names: list[str]) -> Collect:
        raise ConnectionError("no tracking server at localhost:5000")

    def register(register):
        register.tracker("remote", no_server)
        register.tracker("flaky", lambda cfg, run_dir, names: bad)
        register.tracker("good", lambda cfg, run_dir, names: good)
        register.tracker("optout", lambda cfg, run_dir, names: None)

    plugins = load_plugins(autoload=False, extra={"mine": _plugin(register)})
    with caplog.at_level(logging.WARNING, logger="mtrl.tracking"):
        sinks = make_sinks(_cfg(), None, ["a"], trackers=tracker_factories(_cfg(), plugins))
        assert list(sinks) == [bad, good]  # remote left out, optout stayed out
        sinks.write({"charts/env_steps": 1})
        sinks.write({"charts/env_steps": 2})
        sinks.close()
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "tracking: tracker 'remote' (plugin 'mine') failed to start and is left out: "
        "ConnectionError: no tracking server at localhost:5000",
        "tracking: tracker 'flaky' (plugin 'mine') failed and is turned off: "
        "OSError: dashboard unreachable",
    ]
    assert [r["charts/env_steps"] for r in good.records] == [1, 2] and good.closed


def test_garbage_registrations_are_rejected_one_by_one() -> None:
    def register(register):
        register.tracker("bad name!", lambda cfg, run_dir, names: None)
        register.tracker("notcallable", 42)
        register.tracker("arity", lambda cfg: None)
        register.tracker("ok", lambda cfg, run_dir, names: None)

    plugins = load_plugins(autoload=False, extra={"mine": _plugin(register)})
    info = plugins.infos["mine"]
    assert info.status == "error" and len(info.errors) == 3
    assert any("'bad name!'" in e for e in info.errors)
    assert any("factory must be callable" in e for e in info.errors)
    assert any("three positional arguments" in e for e in info.errors)
    assert info.trackers == ["ok"]


def test_taken_name_is_an_error_of_the_later_plugin() -> None:
    def first(register):
        register.tracker("mlflow", lambda cfg, run_dir, names: None)

    def second(register):
        register.tracker("mlflow", lambda cfg, run_dir, names: None)

    plugins = load_plugins(autoload=False, extra={"a": _plugin(first), "b": _plugin(second)})
    assert plugins.trackers.get("mlflow").plugin == "a"
    assert plugins.infos["a"].status == "ok"
    assert "already registered by plugin 'a'" in plugins.infos["b"].errors[0]


def test_unavailable_and_raising_hooks_are_isolated() -> None:
    def missing(register):
        raise PluginUnavailable("needs mlflow: pip install mlflow")

    def broken(register):
        raise RuntimeError("boom")

    def returns(register):
        return [("x", None)]

    plugins = load_plugins(
        autoload=False,
        extra={"m": _plugin(missing), "b": _plugin(broken), "r": _plugin(returns)},
    )
    assert plugins.infos["m"].status == "unavailable"
    assert plugins.infos["m"].errors == ["needs mlflow: pip install mlflow"]
    assert "mtrl_register_trackers raised RuntimeError: boom" in plugins.infos["b"].errors[0]
    assert "must call register.tracker" in plugins.infos["r"].errors[0]
    assert plugins.infos["scheduler"].status == "ok"


def test_built_in_trackers_register_through_the_hook(fresh_plugins: None) -> None:
    plugins = get_plugins()
    info = plugins.infos["tracking"]
    assert (info.status, info.builtin, info.hooks) == ("ok", True, ["mtrl_register_trackers"])
    assert info.trackers == BUILTIN == ["jsonl", "csv", "episodes", "wandb", "tensorboard"]
    assert {plugins.trackers.get(name).plugin for name in BUILTIN} == {"tracking"}
    assert "TensorBoard" in plugins.trackers.get("tensorboard").description


@pytest.mark.parametrize(
    ("tracking", "expected"),
    [
        ({}, [JsonlSink, CsvSink, EpisodeCsvSink, PlainConsole]),
        ({"trackers": []}, [JsonlSink, CsvSink, EpisodeCsvSink, PlainConsole]),
        ({"csv": False}, [JsonlSink, EpisodeCsvSink, PlainConsole]),
        (
            {"tensorboard": {"enabled": True}},
            [JsonlSink, CsvSink, EpisodeCsvSink, TensorboardSink, PlainConsole],
        ),
    ],
)
def test_a_runs_sinks_come_from_the_registry_as_they_were_wired_before(
    tmp_path: Path, tracking: dict[str, Any], expected: list[type]
) -> None:
    """The run files, then the console last; ``tracking.trackers`` leaves the built-ins be.
    Without a registry, ``make_sinks`` starts the same built-ins."""
    cfg = ExperimentConfig.model_validate(
        {
            "tasks": [{"env": "gymnasium/CartPole-v1"}],
            "tracking": {"console": "plain", "wandb": {"mode": "disabled"}, **tracking},
        }
    )
    plugins = load_plugins(autoload=False)
    for trackers in (tracker_factories(cfg, plugins), None):
        sinks = make_sinks(cfg, tmp_path, ["a"], trackers)
        assert [type(s) for s in sinks] == expected
        sinks.close()
    assert not make_sinks(cfg, None, ["a"], tracker_factories(cfg, plugins), console="quiet")
