"""docs/config-reference.md is the config models rendered (mtrl/config/reference.py, written by
mtrl/cli/reference.py): the committed page is up to date, and it holds every field of every
section with its default, the built-in rules' settings sections included."""

from __future__ import annotations

from pathlib import Path

from mtrl.algorithms.builtin import builtin_algorithms
from mtrl.algorithms.impala_replay import ImpalaReplaySettings
from mtrl.algorithms.sac import SacSettings
from mtrl.cli.reference import main
from mtrl.config import ExperimentConfig, LearnerConfig, ModelConfig
from mtrl.config.reference import PAGE, render

ROOT = Path(__file__).parents[2]


def test_the_committed_config_reference_is_up_to_date() -> None:
    assert main(["--check", "--root", str(ROOT)]) == 0, (
        f"{PAGE} is out of date: run python -m mtrl.cli.reference and commit it"
    )


def test_the_reference_lists_every_field_with_its_type_default_and_description() -> None:
    page = render(builtin_algorithms().settings_models())
    for model in (ExperimentConfig, LearnerConfig, ModelConfig, SacSettings, ImpalaReplaySettings):
        for name in model.model_fields:
            assert f"| `{name}` |" in page, name
    assert "## `learner.sac`" in page and "## `learner.impala_replay`" in page
    assert "## `learner.sac`" not in render(), "no rule's section without its model"
    assert "| `learning_rate` | float > 0 |" in page
    assert "## `learner.model.torso_mixture`" in page and "## `tasks[]`" in page
    assert "| `total_env_steps` | int > 0 | `1000000` | Training stops after" in page
