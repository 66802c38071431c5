"""Trackers that bring their settings model: ``tracking.<tracker>:`` validated with the
plugin's own model (file:line for a bad key or value, a hint for an unknown section), handed to
the factory, and included in ``mtrl schema``."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from mtrl.config import ExperimentConfig, config_schema, parse_config
from mtrl.errors import ConfigError
from mtrl.plugins import Plugins, hookimpl, load_plugins
from mtrl.tracking import make_sinks, tracker_factories


@pytest.fixture(autouse=True)
def _no_env_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip the env backends: these tests only need trackers (and speed)."""
    monkeypatch.setenv("MTRL_DISABLE_PLUGINS", "gymnasium,envpool,pettingzoo,tensor,chaos")


class Dashboard(BaseModel):
    """A made-up tracker's settings (``extra`` left at pydantic's default on purpose: the host
    refuses unknown keys whatever the model says)."""

    url: str = "http://localhost:9"
    project: str = "mtrl"
    every: int = Field(default=1, ge=1)
    mode: Literal["online", "offline"] = "online"


class Keep:
    """A sink that records the settings it was built with."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def write(self, record: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


def _plugins(**extra_registrations: Any) -> tuple[Plugins, list[Any]]:
    """Plugin ``dash`` offering tracker ``dash`` (settings :class:`Dashboard`) and ``plain``
    (none); returns the registry and the settings each ``dash`` factory call received."""
    got: list[Any] = []

    def make_dash(cfg: Any, run_dir: Path | None, names: list[str], settings: Any) -> Keep:
        got.append(settings)
        return Keep(settings)

    def register(register: Any) -> None:
        register.tracker("dash", make_dash, settings=Dashboard, description="a dashboard")
        register.tracker("plain", lambda cfg, run_dir, names: None)
        for name, kwargs in extra_registrations.items():
            register.tracker(name, **kwargs)

    plugin = types.SimpleNamespace(mtrl_register_trackers=hookimpl(register))
    return load_plugins(autoload=False, extra={"dash": plugin}), got


def _parse(text: str, plugins: Plugins | None = None) -> ExperimentConfig:
    context = {} if plugins is None else {"tracker_settings": plugins.trackers.settings_models()}
    return parse_config(text, "my.yaml", **context)


HEAD = "tasks:\n  - env: gymnasium/CartPole-v1\ntracking:\n  console: quiet\n"


def _problems(text: str, plugins: Plugins | None) -> list[str]:
    with pytest.raises(ConfigError) as e:
        _parse(text, plugins)
    return e.value.problems


def test_a_section_is_validated_with_the_trackers_model_and_reaches_its_factory() -> None:
    plugins, got = _plugins()
    cfg = _parse(HEAD + "  dash:\n    project: runs\n    every: 5\n", plugins)
    assert cfg.tracking.section("dash") == Dashboard(project="runs", every=5)
    assert cfg.tracking.section("plain") is None
    sinks = make_sinks(cfg, None, ["t"], tracker_factories(cfg, plugins), console="quiet")
    sinks.close()
    assert got == [Dashboard(project="runs", every=5)]


def test_no_section_gives_the_factory_none_and_an_empty_one_the_defaults() -> None:
    plugins, got = _plugins()
    for text in (HEAD, HEAD + "  dash:\n"):
        cfg = _parse(text, plugins)
        make_sinks(cfg, None, ["t"], tracker_factories(cfg, plugins), console="quiet").close()
    assert got == [None, Dashboard()]


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("projet: x", "projet: unknown key 'projet'; did you mean 'project'?"),
        ("every: 0", "every: Input should be greater than or equal to 1 (got 0)"),
        (
            "mode: onlin",
            "mode: Input should be 'online' or 'offline' (got 'onlin'); did you mean 'online'?",
        ),
        (
            "every: 1e3",
            "every: Input should be a valid integer, unable to parse string as an integer "
            "(got '1e3'); YAML reads '1e3' as text, not a number: write 1000 or 1_000",
        ),
    ],
)
def test_a_bad_key_or_value_is_one_line_with_file_and_line(section: str, expected: str) -> None:
    plugins, _ = _plugins()
    text = HEAD + f"  dash:\n    url: http://x\n    {section}\n"
    assert _problems(text, plugins) == [f"my.yaml:7: tracking.dash.{expected}"]


def test_an_unknown_section_names_the_installed_trackers_with_settings() -> None:
    plugins, _ = _plugins()
    (problem,) = _problems(HEAD + "  dahs:\n    url: x\n", plugins)
    assert problem == (
        "my.yaml:5: tracking.dahs: unknown key 'dahs'; did you mean 'dash'? (a tracker's "
        "section needs its plugin installed; trackers with settings: dash)"
    )
    (problem,) = _problems(HEAD + "  plain:\n    url: x\n", plugins)
    assert problem.startswith("my.yaml:5: tracking.plain: tracker 'plain' takes no settings")


def test_the_built_in_keys_keep_their_checks_beside_sections() -> None:
    plugins, _ = _plugins()
    problems = _problems(HEAD + "  csvv: false\n  dash:\n    every: 0\n", plugins)
    assert problems[0] == "my.yaml:5: tracking.csvv: unknown key 'csvv'; did you mean 'csv'?"
    assert problems[1].startswith("my.yaml:7: tracking.dash.every: ")


def test_without_the_models_a_section_is_kept_as_a_mapping_and_a_stray_value_refused() -> None:
    cfg = _parse(HEAD + "  dash:\n    every: 5\n")
    assert cfg.tracking.section("dash") == {"every": 5}
    (problem,) = _problems(HEAD + "  csvv: false\n", None)
    assert problem == "my.yaml:5: tracking.csvv: unknown key 'csvv'; did you mean 'csv'?"


def test_a_config_built_in_code_is_validated_when_its_tracker_starts() -> None:
    plugins, got = _plugins()
    data = {"tasks": [{"env": "gymnasium/CartPole-v1"}], "tracking": {"dash": {"every": 3}}}
    cfg = ExperimentConfig.model_validate(data)
    make_sinks(cfg, None, ["t"], tracker_factories(cfg, plugins), console="quiet").close()
    assert got == [Dashboard(every=3)]


def test_sections_survive_a_dump_and_reload() -> None:
    plugins, _ = _plugins()
    cfg = _parse(HEAD + "  dash:\n    every: 5\n", plugins)
    dumped = cfg.model_dump(mode="json")
    assert dumped["tracking"]["dash"] == Dashboard(every=5).model_dump(mode="json")
    again = ExperimentConfig.model_validate(
        dumped, context={"tracker_settings": plugins.trackers.settings_models()}
    )
    assert again.tracking.section("dash") == Dashboard(every=5)


def test_malformed_settings_registrations_are_problems_of_the_plugin() -> None:
    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")

    plugins, _ = _plugins(
        notamodel={"factory": lambda c, r, n, s: None, "settings": dict},
        threeargs={"factory": lambda c, r, n: None, "settings": Strict},
    )
    errors = " | ".join(plugins.infos["dash"].errors)
    assert "tracker 'notamodel': settings must be a pydantic BaseModel subclass" in errors
    assert (
        "tracker 'threeargs': factory must accept four positional arguments "
        "(cfg, run_dir, task_names, settings)"
    ) in errors
    assert plugins.trackers.settings_models() == {
        **{name: None for name in plugins.trackers.names()},
        "dash": Dashboard,
    }


def test_the_schema_includes_installed_trackers_sections() -> None:
    class Inner(BaseModel):
        depth: int = 2

    class Nested(BaseModel):
        inner: Inner = Inner()

    plugins, _ = _plugins(nested={"factory": lambda c, r, n, s: None, "settings": Nested})
    schema = config_schema(plugins.trackers.settings_models())
    tracking = schema["$defs"]["TrackingConfig"]["properties"]
    assert tracking["dash"]["properties"]["every"]["minimum"] == 1
    assert tracking["nested"]["properties"]["inner"]["$ref"] == "#/$defs/nested__Inner"
    assert schema["$defs"]["nested__Inner"]["properties"]["depth"]["default"] == 2
    assert "plain" not in tracking
    json.dumps(schema)  # plain JSON
    assert "dash" not in config_schema()["$defs"]["TrackingConfig"]["properties"]
