"""A learning rule is one unit: a plugin's rule brings its settings model (``learner.<rule>:``
validated with it, file:line for a bad key, in ``mtrl schema``, handed to the factory), its own
config checks and its replay's memory; the built-in rules register theirs the same way.

The CLI tests "install" the plugin as a real distribution: a module and a ``*.dist-info`` with an
``mtrl`` entry point in a directory put on the path of a ``python -m mtrl.cli`` subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces
from pydantic import BaseModel, Field
from yaml import safe_dump as yaml_dump

import mtrl
from mtrl.algorithms import make_learner
from mtrl.algorithms.builtin import builtin_algorithms
from mtrl.algorithms.impala.parallel import make_impala_learner
from mtrl.algorithms.sac import SacSettings
from mtrl.config import ExperimentConfig, LearnerConfig, TaskConfig, config_schema, parse_config
from mtrl.config.learner import BUILTIN_ALGORITHMS
from mtrl.errors import ConfigError
from mtrl.learner.distributed import DistContext
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import Plugins, hookimpl, load_plugins
from mtrl.train import preflight

VEC = TaskSpaces(spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(2))
HEAD = "tasks:\n  - env: gymnasium/CartPole-v1\nlearner:\n  algorithm: steady\n"


@pytest.fixture(autouse=True)
def _no_env_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only gymnasium's envs (for the env id): the tests need rules, and speed."""
    monkeypatch.setenv("MTRL_DISABLE_PLUGINS", "envpool,pettingzoo,tensor,chaos")


class Steady(BaseModel):
    """A made-up rule's settings (``extra`` left at pydantic's default on purpose: the host
    refuses unknown keys whatever the model says)."""

    warmup: int = Field(default=0, ge=0)
    min_batch: int = 1


def _plugins(**extra_registrations: Any) -> tuple[Plugins, list[Any]]:
    """Plugin ``rules`` offering rule ``steady`` (settings :class:`Steady`, a check that the
    batch holds ``min_batch`` columns; IMPALA's update underneath) and ``bare`` (no settings);
    returns the registry and the settings each ``steady`` factory call received."""
    got: list[Any] = []

    def steady(model, cfg, names, ctx, device, lr_scales, settings):  # type: ignore[no-untyped-def]
        got.append(settings)
        return make_impala_learner(model, cfg, names, ctx, device, lr_scales)

    def check(cfg: Any, settings: Steady) -> list[str]:
        if cfg.batch_size >= settings.min_batch:
            return []
        return [f"rule 'steady' needs learner.batch_size >= {settings.min_batch}"]

    def register(register: Any) -> None:
        register.algorithm("steady", steady, settings=Steady, checks=check)
        register.algorithm("bare", make_impala_learner)
        for name, kwargs in extra_registrations.items():
            register.algorithm(name, **kwargs)

    plugin = types.SimpleNamespace(mtrl_register_algorithms=hookimpl(register))
    return load_plugins(autoload=False, extra={"rules": plugin}), got


def _parse(text: str, plugins: Plugins | None) -> ExperimentConfig:
    context = {} if plugins is None else plugins.config_context()
    return parse_config(text, "my.yaml", **context)


def _problems(text: str, plugins: Plugins | None) -> list[str]:
    with pytest.raises(ConfigError) as e:
        _parse(text, plugins)
    return e.value.problems


def _build(plugins: Plugins, cfg: ExperimentConfig) -> Any:
    model = MultiTaskModel([VEC], cfg.learner.model)
    return make_learner(plugins, model, cfg.learner, ["t"], DistContext(), None)


def test_a_rules_section_is_validated_with_its_model_and_reaches_its_factory() -> None:
    plugins, got = _plugins()
    cfg = _parse(HEAD + "  steady:\n    warmup: 5\n", plugins)
    assert cfg.learner.section("steady") == Steady(warmup=5)
    _build(plugins, cfg)
    _build(plugins, _parse(HEAD, plugins))  # no section: the model's defaults
    assert got == [Steady(warmup=5), Steady()]
    bare = _parse(HEAD.replace("steady", "bare"), plugins)
    assert _build(plugins, bare).version == 0, "a rule without settings: six arguments"


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("warmpu: 3", "warmpu: unknown key 'warmpu'; did you mean 'warmup'?"),
        ("warmup: -1", "warmup: Input should be greater than or equal to 0 (got -1)"),
    ],
)
def test_a_bad_key_or_value_is_one_line_with_file_and_line(section: str, expected: str) -> None:
    plugins, _ = _plugins()
    text = HEAD + f"  steady:\n    min_batch: 1\n    {section}\n"
    assert _problems(text, plugins) == [f"my.yaml:7: learner.steady.{expected}"]


def test_an_unknown_section_names_the_installed_rules_with_settings() -> None:
    plugins, _ = _plugins()
    (problem,) = _problems(HEAD + "  steadyy:\n    warmup: 1\n", plugins)
    assert problem.startswith(
        "my.yaml:5: learner.steadyy: unknown key 'steadyy'; did you mean 'steady'? (a learning "
        "rule's section needs its plugin installed; learning rules with settings: "
    )
    assert "steady" in problem.rsplit(":", 1)[1] and "sac" in problem.rsplit(":", 1)[1]
    (problem,) = _problems(HEAD + "  bare:\n    x: 1\n", plugins)
    assert problem.startswith("my.yaml:5: learner.bare: learning rule 'bare' takes no settings")


def test_a_config_built_in_code_is_validated_when_its_learner_is_built() -> None:
    plugins, got = _plugins()
    names = {"algorithms": plugins.algorithms.parallel_support()}  # the names alone

    def built(section: dict[str, Any]) -> ExperimentConfig:
        data = {"tasks": [{"env": "a/b"}], "learner": {"algorithm": "steady", "steady": section}}
        return ExperimentConfig.model_validate(data, context=names)

    cfg = built({})
    assert cfg.learner.section("steady") == {}, "kept as a mapping without the models"
    _build(plugins, cfg)
    assert got == [Steady()]
    typo = built({"warmpu": 1})
    with pytest.raises(ConfigError) as err:
        _build(plugins, typo)
    assert err.value.problems == [
        "learner.steady.warmpu: unknown key 'warmpu'; did you mean 'warmup'?"
    ]


def test_a_config_built_in_code_may_hold_the_settings_themselves() -> None:
    """A built-in rule's settings given as their model reach the rule as they are."""
    plugins, _ = _plugins()
    sac = SacSettings(batch_size=7, learning_starts=3)
    learner = LearnerConfig(algorithm="sac", sac=sac)  # type: ignore[call-arg]
    cfg = ExperimentConfig(tasks=[TaskConfig(env="a/b")], learner=learner)
    assert cfg.learner.section("sac") is sac
    assert _build(plugins, cfg).sac == sac


def test_a_rules_own_check_refuses_a_config_at_parse_and_at_build() -> None:
    plugins, got = _plugins()
    text = HEAD + "  batch_size: 4\n  steady: {min_batch: 8}\n"
    assert _problems(text, plugins) == [
        "my.yaml:4: learner.algorithm: rule 'steady' needs learner.batch_size >= 8"
    ]
    assert _parse(text.replace("batch_size: 4", "batch_size: 8"), plugins)
    # The rules' names alone: no rule's check runs when the config is parsed ...
    unchecked = parse_config(text, algorithms=plugins.algorithms.parallel_support())
    with pytest.raises(ConfigError, match=r"needs learner.batch_size >= 8"):
        _build(plugins, unchecked)  # ... but the host runs it before the factory
    assert got == []


def test_sections_survive_a_dump_and_reload() -> None:
    plugins, _ = _plugins()
    cfg = _parse(HEAD + "  steady:\n    warmup: 5\n", plugins)
    dumped = cfg.model_dump(mode="json")
    assert dumped["learner"]["steady"] == {"warmup": 5, "min_batch": 1}
    context = plugins.config_context()
    keys = ("algorithms", "algorithm_settings", "algorithm_checks")
    again = ExperimentConfig.model_validate(dumped, context={k: context[k] for k in keys})
    assert again.learner.section("steady") == Steady(warmup=5)


def test_the_schema_includes_the_installed_rules_sections() -> None:
    plugins, _ = _plugins()
    schema = config_schema(algorithm_settings=plugins.algorithms.settings_models())
    learner = schema["$defs"]["LearnerConfig"]["properties"]
    assert learner["steady"]["properties"]["warmup"]["minimum"] == 0
    assert learner["sac"]["properties"]["replay_ratio"]["default"] == 256.0
    assert "bare" not in learner and "impala" not in learner
    assert "steady" not in config_schema()["$defs"]["LearnerConfig"]["properties"]


def test_malformed_registrations_are_problems_of_the_plugin() -> None:
    plugins, _ = _plugins(
        notamodel={"factory": lambda *a: None, "settings": dict},
        sixargs={"factory": lambda m, c, n, x, d, lr: None, "settings": Steady},
        nocapacity={"factory": lambda *a: None, "replay_bytes": lambda *a: 0},
        capacityalone={"factory": lambda *a: None, "replay_capacity": 10},
        badcheck={"factory": lambda *a: None, "checks": "no"},
    )
    errors = " | ".join(plugins.infos["rules"].errors)
    assert "'notamodel': settings must be a pydantic BaseModel subclass" in errors
    assert (
        "'sixargs': factory must accept 7 positional arguments (model, cfg, task_names, ctx, "
        "device, lr_scales, settings)"
    ) in errors
    assert "'nocapacity': replay_capacity must be the rule's default replay.capacity" in errors
    assert "'capacityalone': replay_capacity is given without replay_bytes" in errors
    assert "'badcheck': checks must be callable, got str" in errors
    assert [n for n in plugins.algorithms.names() if n not in BUILTIN_ALGORITHMS] == [
        "steady",
        "bare",
    ]


def test_a_plugin_rules_replay_counts_in_the_memory_check_under_replay_capacity() -> None:
    """A plugin's rule sizes its replay from the shared ``replay:`` section too, its own
    default standing in for ``replay.capacity: null``."""
    plugins, _ = _plugins(
        replayer={
            "factory": lambda *a: None,
            "replay_bytes": lambda cfg, s, obs, act: cfg.replay.capacity_or(10**7) * 10**6,
            "replay_capacity": 10**7,
        }
    )
    text = "tasks: [{env: a/b}]\nlearner: {algorithm: replayer}\n"
    rules = plugins.algorithms.parallel_support()
    for replay, value in (("", 10**7), ("replay: {capacity: 20000000}\n", 2 * 10**7)):
        cfg = parse_config(text + replay, "r.yaml", algorithms=rules)
        with pytest.raises(preflight.MemoryCheckError) as err:
            preflight.check_memory(cfg, algorithms=plugins.algorithms)
        (line,) = err.value.problems
        assert line.startswith(f"replay.capacity = {value}: the run needs about ")
        assert f"(tasks[0] replay {value // 1000:,} GB)" in line
        assert "; lower replay.capacity" in line
    assert plugins.algorithms.get("replayer").has_replay
    assert not plugins.algorithms.get("steady").has_replay


def test_a_rules_learner_defaults_fill_the_keys_a_config_leaves_out() -> None:
    """A rule's own ``learner`` defaults reach the parsed config (and so the resolved config a
    run writes, and every model built from it), a nested section key by key; the config's own
    keys win; another rule's config keeps the host's defaults."""
    plugins, _ = _plugins(
        slim={
            "factory": make_impala_learner,
            "learner_defaults": {"batch_size": 3, "model": {"encoder_layers": 1, "torso": [32]}},
        }
    )
    slim = "tasks:\n  - env: gymnasium/CartPole-v1\nlearner:\n  algorithm: slim\n"
    learner = _parse(slim, plugins).learner
    model = learner.model
    assert (model.encoder_layers, model.torso, model.encoder_dim) == (1, [32], 256)
    assert (learner.batch_size, learner.unroll_length) == (3, 20)
    learner = _parse(slim + "  batch_size: 5\n  model:\n    torso: [8, 8]\n", plugins).learner
    assert (learner.batch_size, learner.model.encoder_layers, learner.model.torso) == (5, 1, [8, 8])
    dumped = _parse(slim, plugins).model_dump(mode="json")
    known = plugins.algorithms.parallel_support()  # the rule's name, not its model defaults
    assert parse_config(yaml_dump(dumped), algorithms=known).learner.model.torso == [32]
    assert _parse(HEAD, plugins).learner.model.torso == [256, 256]
    assert _parse(HEAD, plugins).learner.batch_size == 32
    assert plugins.algorithms.learner_defaults()["slim"]["batch_size"] == 3
    built = _build(plugins, _parse(slim, plugins))
    linears = [m for m in built.model.modules() if isinstance(m, torch.nn.Linear)]
    assert [tuple(m.weight.shape) for m in linears[:2]] == [(256, 4), (32, 256)]


def test_sac_brings_stable_baselines3s_shape_for_one_task() -> None:
    """SAC's own defaults: one encoder layer and a one-layer torso, each 256 wide (one task's
    networks have SB3's two hidden layers of 256), and an update on every unroll of 8 steps."""
    cfg = _parse(
        "tasks:\n  - env: gymnasium/Pendulum-v1\nlearner:\n  algorithm: sac\n", load_plugins()
    )
    assert (cfg.learner.model.encoder_layers, cfg.learner.model.torso) == (1, [256])
    assert (cfg.learner.unroll_length, cfg.learner.batch_size) == (8, 1)


def test_malformed_learner_defaults_are_problems_of_the_plugin() -> None:
    plugins, _ = _plugins(
        typo={"factory": make_impala_learner, "learner_defaults": {"torso": [8]}},
        rule={"factory": make_impala_learner, "learner_defaults": {"algorithm": "sac"}},
        badvalue={
            "factory": make_impala_learner,
            "learner_defaults": {"model": {"encoder_layers": 0}},
        },
        notamap={"factory": make_impala_learner, "learner_defaults": [("torso", [8])]},
    )
    errors = " | ".join(plugins.infos["rules"].errors)
    assert "'typo': learner_defaults names no learner key: torso (keys: unroll_length," in errors
    assert "'rule': learner_defaults names no learner key: algorithm" in errors
    assert "'badvalue': learner_defaults: learner.model.encoder_layers: Input should be" in errors
    assert "'notamap': learner_defaults must be a mapping of learner keys" in errors
    assert not {"typo", "rule", "badvalue", "notamap"} & set(plugins.algorithms.names())


def test_the_built_in_rules_without_a_registry_are_the_ones_registered() -> None:
    """The names and parallel modes a config may give without the registry
    (``BUILTIN_ALGORITHMS``) are what the built-in plugin registers."""
    registered = builtin_algorithms().parallel_support()
    assert {name: set(modes) for name, modes in registered.items()} == BUILTIN_ALGORITHMS


# -- the CLI, with the rule installed as a real distribution -----------------------------------

PLUGIN = """
from pydantic import BaseModel, Field
from mtrl.plugins import hookimpl


class Steady(BaseModel):
    warmup: int = Field(default=0, ge=0)


def make(model, cfg, task_names, ctx, device, lr_scales, settings):
    from mtrl.algorithms.impala.parallel import make_impala_learner

    return make_impala_learner(model, cfg, task_names, ctx, device, lr_scales)


@hookimpl
def mtrl_register_algorithms(register):
    register.algorithm("steady", make, settings=Steady, description="IMPALA, steadily")
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A directory holding module ``mtrl_steady`` and its distribution's entry point."""
    site = tmp_path / "site"
    info = site / "mtrl_steady-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mtrl-steady\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[mtrl]\nsteady = mtrl_steady\n")
    (site / "mtrl_steady.py").write_text(textwrap.dedent(PLUGIN))
    return site


def _mtrl(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``mtrl ARGS`` with the plugin's site first on the path, then this tree's mtrl."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MTRL_")}
    env["MTRL_DISABLE_PLUGINS"] = "envpool,pettingzoo,tensor,chaos"
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(mtrl.__file__).parents[1])])
    return subprocess.run(
        [sys.executable, "-m", "mtrl.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )


def test_validate_reports_a_bad_key_of_a_plugin_rules_section_in_one_line(
    site: Path, tmp_path: Path
) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(HEAD + "  steady:\n    warmpu: 3\n")
    bad = _mtrl(site, "validate", str(cfg))
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.strip() == (
        f"{cfg}:6: learner.steady.warmpu: unknown key 'warmpu'; did you mean 'warmup'?"
    )
    assert "Traceback" not in bad.stderr + bad.stdout
    cfg.write_text(HEAD + "  steady:\n    warmup: 3\n")
    ok = _mtrl(site, "validate", str(cfg))
    assert ok.returncode == 0, ok.stderr
    schema = json.loads(_mtrl(site, "schema").stdout)
    learner = schema["$defs"]["LearnerConfig"]["properties"]
    assert learner["steady"]["properties"]["warmup"]["minimum"] == 0


SAC_CONFIGS_MEASURED_DEEP = (
    "mt10",
    "sac_half_cheetah",
    "sac_heat1d",
    "sac_inverted_pendulum",
    "sac_pendulum_cartpole",
    "steer_outbreak",
)


@pytest.mark.parametrize("name", SAC_CONFIGS_MEASURED_DEEP)
def test_shipped_sac_configs_keep_the_encoder_their_results_were_measured_with(name: str) -> None:
    """SAC's own one-layer encoder default fills only configs that leave the depth out; the
    shipped configs with a model section keep the two-layer encoder docs/BENCHMARKS.md's figures
    for them were measured with (``sac_inverted_pendulum``: SB3's two 256-wide layers)."""
    text = (Path(__file__).resolve().parents[2] / "configs" / f"{name}.yaml").read_text()
    context = load_plugins().config_context()
    context.pop("env_ids")  # mt10's Meta-World ids live in their own venv: not checked here
    model = parse_config(text, f"{name}.yaml", **context).learner.model
    assert model.encoder_layers == 2
