"""The ``tune:`` section (mtrl/config/tune.py): a search space is refused at parse time, with
the path and the reason, unless every value it can deal makes a valid config."""

from __future__ import annotations

import pytest

from mtrl.config import parse_config
from mtrl.config.loading import ConfigError
from mtrl.config.tune import get_path, set_path

BASE = "tasks: [{env: gymnasium/CartPole-v1}, {env: gymnasium/Acrobot-v1}]\n"


def _parse(tune: str):
    return parse_config(BASE + f"tune: {tune}\n", "exp.yaml")


def test_a_search_over_learner_and_task_fields_is_accepted() -> None:
    cfg = _parse(
        "{population: 2, interval_env_steps: 5000, search: {"
        "learner.learning_rate: {log_uniform: [1.0e-4, 3.0e-3]}, "
        "tasks.1.learning_rate_scale: {choice: [0.5, 1, 2]}, tasks.0.num_envs: {choice: [4, 8]}}}"
    )
    assert cfg.tune is not None and cfg.tune.population == 2
    assert cfg.tune.search["learner.learning_rate"].kind == "log_uniform"
    assert cfg.tune.search["tasks.0.num_envs"].extremes() == [4, 8]


@pytest.mark.parametrize(
    ("tune", "said"),
    [
        ("{search: {learner.nope: {uniform: [0, 1]}}}", "'learner.nope' names no field"),
        ("{search: {tasks.5.weight: {uniform: [0.5, 1]}}}", "'tasks.5.weight' names no field"),
        ("{search: {learner.optimizer: {uniform: [0, 1]}}}", "is 'adam', not a number"),
        ("{search: {learner.learning_rate: {uniform: [-1, 1]}}}", "learning_rate = -1.0 is not"),
        ("{search: {learner.gamma: {uniform: [0.9, 1.5]}}}", "gamma = 1.5 is not a valid"),
        ("{search: {tasks.0.num_envs: {choice: [4, 4.5]}}}", "4.5 is not"),
        ("{search: {learner.gamma: {uniform: [0.9, 0.99], choice: [1]}}}", "exactly one of"),
        ("{search: {learner.gamma: {log_uniform: [0, 0.99]}}}", "needs low > 0"),
        ("{search: {learner.gamma: {uniform: [0.99, 0.9]}}}", "low < high"),
        ("{algorithm: pb2, search: {learner.gamma: {choice: [0.9, 0.99]}}}", "pb2 models"),
        ("{population: 1, search: {learner.gamma: {choice: [0.9]}}}", "tune.population"),
    ],
)
def test_a_bad_search_space_is_refused_naming_the_path(tune: str, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        _parse(tune)
    assert said in str(err.value)
    assert "exp.yaml" in str(err.value)


def test_dotted_paths_read_and_write_plain_config_data() -> None:
    data = {"learner": {"learning_rate": 1e-3}, "tasks": [{"weight": 1.0}, {"weight": 2.0}]}
    assert get_path(data, "tasks.1.weight") == 2.0
    set_path(data, "tasks.1.weight", 3.0)
    set_path(data, "learner.parallel.sync_every", 10)
    assert data["tasks"][1]["weight"] == 3.0
    assert data["learner"]["parallel"] == {"sync_every": 10}
    with pytest.raises(KeyError):
        get_path(data, "learner.nope")
