"""Config mistakes a newcomer makes get a config error that says how to fix them: task fields
written as env kwargs (``num_envs``, ``seed``), and ``1e6`` (text in YAML) for a step count."""

from __future__ import annotations

import pytest

from mtrl.config import ExperimentConfig, parse_config
from mtrl.errors import ConfigError
from mtrl.train.trainer import Trainer

BASE = """\
actors: {mode: serial}
tracking: {console: quiet, csv: false, wandb: {mode: disabled}}
tasks:
  - env: gymnasium/CartPole-v1
    env_kwargs:
      num_envs: 3
      seed: 7
"""


def test_task_fields_in_env_kwargs_are_config_errors_at_their_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(BASE, "c.yaml", env_ids=["gymnasium/CartPole-v1"])
    assert err.value.problems == [
        "c.yaml:6: tasks[0].env_kwargs.num_envs: num_envs is the task's own field (how many "
        "env copies each actor steps), not an env kwarg: move `num_envs: 3` out of env_kwargs, "
        "next to `env:`",
        "c.yaml:7: tasks[0].env_kwargs.seed: seed is the task's own field (the seed of the "
        "task's envs), not an env kwarg: move `seed: 7` out of env_kwargs, next to `env:`",
    ]


def test_a_config_built_in_code_fails_the_same_way_not_with_a_type_error() -> None:
    cfg = ExperimentConfig.model_validate(
        {
            "actors": {"mode": "serial"},
            "tracking": {"console": "quiet", "csv": False, "wandb": {"mode": "disabled"}},
            "tasks": [{"env": "gymnasium/CartPole-v1", "env_kwargs": {"num_envs": 3}}],
        }
    )
    with pytest.raises(ConfigError, match=r"tasks\[0\]\.env_kwargs\.num_envs: num_envs is the"):
        Trainer(cfg, write_run_dir=False, console=False)


@pytest.mark.parametrize(
    ("written", "hint"),
    [
        ("1e6", "YAML reads '1e6' as text, not a number: write 1000000 or 1_000_000"),
        ("2.5e5", "YAML reads '2.5e5' as text, not a number: write 250000 or 250_000"),
        ("1.5e0", "write a whole number"),
    ],
)
def test_a_step_count_in_e_notation_says_how_to_write_it(written: str, hint: str) -> None:
    text = f"tasks: [{{env: gymnasium/CartPole-v1}}]\ntotal_env_steps: {written}\n"
    with pytest.raises(ConfigError) as err:
        parse_config(text, "c.yaml")
    (line,) = err.value.problems
    assert line.startswith("c.yaml:2: total_env_steps: ") and line.endswith(hint), line


def test_underscored_step_counts_load() -> None:
    cfg = parse_config("tasks: [{env: gymnasium/CartPole-v1}]\ntotal_env_steps: 1_000_000\n")
    assert cfg.total_env_steps == 1_000_000
