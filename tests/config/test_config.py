"""Experiment configs: shipped files validate; broken ones give one line per problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtrl.config import ExperimentConfig, config_schema, load_config, parse_config
from mtrl.errors import ConfigError
from mtrl.plugins import get_plugins

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))


#: Configs whose envs come from a plugin that lives in its own venv, and the job that
#: validates them there.
OWN_VENV = {
    "mt10.yaml": ("metaworld", "scripts/metaworld_tests.sh"),
    "mt10_impala.yaml": ("metaworld", "scripts/metaworld_tests.sh"),
    "mt10_impala_replay.yaml": ("metaworld", "scripts/metaworld_tests.sh"),
    "mt10_sample_efficient.yaml": ("metaworld", "scripts/metaworld_tests.sh"),
    "mt50.yaml": ("metaworld", "scripts/metaworld_tests.sh"),
}


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_validates_against_installed_plugins(path: Path) -> None:
    plugin, job = OWN_VENV.get(path.name, (None, None))
    if plugin is not None and plugin not in get_plugins().infos:
        pytest.skip(f"{path.name} needs the {plugin} plugin, in its own venv: {job}")
    cfg = load_config(path, **get_plugins().config_context())
    assert cfg.tasks


def test_only_the_task_list_is_required() -> None:
    cfg = parse_config("tasks:\n  - env: gymnasium/CartPole-v1\n")
    assert cfg.tasks[0].num_envs == 16 and cfg.tasks[0].key == "gymnasium/CartPole-v1"
    assert cfg.learner.popart.enabled and cfg.scheduler.policy == "fixed"
    assert cfg.task_seed(0) == 0


def test_task_seeds_derive_from_the_run_seed() -> None:
    cfg = parse_config("seed: 10\ntasks:\n  - env: a/x\n  - env: a/y\n    seed: 3\n  - env: a/z\n")
    assert [cfg.task_seed(i) for i in range(3)] == [10, 3, 12]


def _problems(text: str, env_ids: list[str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "exp.yaml", env_ids=env_ids)
    return err.value.problems


def test_each_problem_is_one_line_with_file_line_and_path() -> None:
    text = (
        "seed: -1\n"  # 1
        "tasks:\n"  # 2
        "  - env: gymnasium/CartPol-v1\n"  # 3
        "    num_envs: -3\n"  # 4
        "    colour: red\n"  # 5
        "  - env: gymnasium/CartPole-v1\n"  # 6
        "    weight: heavy\n"  # 7
        "learner:\n"  # 8
        "  learning_rte: 0.1\n"  # 9
    )
    problems = _problems(text, env_ids=["gymnasium/CartPole-v1", "gymnasium/Acrobot-v1"])
    assert problems == [
        "exp.yaml:1: seed: Input should be greater than or equal to 0 (got -1)",
        "exp.yaml:3: tasks[0].env: unknown env id 'gymnasium/CartPol-v1'; did you mean "
        "'gymnasium/CartPole-v1'?",
        "exp.yaml:4: tasks[0].num_envs: Input should be greater than 0 (got -3)",
        "exp.yaml:5: tasks[0].colour: unknown key 'colour'; allowed keys: env, name, "
        "env_kwargs, num_envs, weight, learning_rate_scale, reward_scale, target_score, seed, "
        "placement, anakin",
        "exp.yaml:7: tasks[1].weight: Input should be a valid number, unable to parse string "
        "as a number (got 'heavy')",
        "exp.yaml:9: learner.learning_rte: unknown key 'learning_rte'; did you mean "
        "'learning_rate'?",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "exp.yaml: the config is empty"),
        ("tasks: [", "exp.yaml:1:9: invalid YAML"),
        ("- 1\n", "the config must be a mapping"),
        ("tasks: []\n", "exp.yaml:1: tasks: at least one task is required"),
        ("name: x\n", "exp.yaml:1: tasks: required key is missing"),
        ("tasks:\n  - env: a/b\ntasks: []\n", "exp.yaml:3:1: invalid YAML: duplicate key 'tasks'"),
        (
            "tasks:\n  - env: a/b\n  - env: a/b\n",
            "exp.yaml:3: tasks[1].name: task name 'a/b' is already used by tasks[0]",
        ),
        (
            "tasks:\n  - env: a/b\nlearner:\n  popart:\n    sigma_min: 2\n    sigma_max: 1\n",
            "learner.popart: sigma_min (2.0) must be below sigma_max (1.0)",
        ),
        ("tasks:\n  - env: a/b\nlearner:\n  device: tpu\n", "learner.device: unknown device"),
        ("tasks:\n  - env: a/b\nscheduler:\n  policy: greedy\n", "scheduler.policy: Input should"),
        ("tasks:\n  - env: a/b\nlearner: 3\n", "learner: must be a mapping of keys, got int"),
        ("tasks:\n  - env: a/b\n    num_envs: 1.5\n", "tasks[0].num_envs"),
    ],
)
def test_broken_configs(text: str, expected: str) -> None:
    problems = _problems(text)
    assert any(expected in p for p in problems), problems


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml")


def test_unsafe_yaml_tags_are_refused() -> None:
    problems = _problems("tasks: !!python/object/apply:os.system ['echo hi']\n")
    assert "invalid YAML" in problems[0]


def test_schema_documents_every_field() -> None:
    schema = config_schema()
    assert schema["required"] == ["tasks"]
    task = schema["$defs"]["TaskConfig"]["properties"]
    assert "Env id" in task["env"]["description"]
    for name, model in schema["$defs"].items():
        for field, prop in model.get("properties", {}).items():
            assert prop.get("description") or "$ref" in prop or "allOf" in prop, (
                f"{name}.{field} has no description"
            )


def test_schema_accepts_the_shipped_configs() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    schema = config_schema()
    for path in CONFIGS:
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)


def test_round_trip_through_json() -> None:
    cfg = parse_config("tasks:\n  - env: a/b\n    env_kwargs: {max_episode_steps: 10}\n")
    again = ExperimentConfig.model_validate_json(cfg.model_dump_json())
    assert again == cfg
