"""``mtrl validate`` refuses what ``mtrl train`` (or a ``mtrl tune`` member) would refuse later:
a soft-modular torso with one torso width, a MOORE torso with more experts than output
dimensions, and ``tune.metric: normalized_score`` over tasks whose env registers no reference
score; configs whose envs live in another venv (Meta-World) say where, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtrl.cli import main
from mtrl.config import parse_config
from mtrl.errors import ConfigError

TASKS = """\
tasks:
  - env: gymnasium/CartPole-v1
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "c.yaml")
    return err.value.problems


def test_soft_modular_with_one_torso_width_is_a_config_error_naming_the_key() -> None:
    text = TASKS + "learner:\n  model:\n    torso: [64]\n    torso_mixture: {kind: soft_modular}\n"
    [line] = _problems(text)
    assert line.startswith("c.yaml:")
    assert "learner.model.torso_mixture" in line and "soft_modular" in line
    assert "learner.model.torso" in line and "[64]" in line


def test_soft_modular_with_two_torso_widths_is_accepted() -> None:
    text = TASKS + (
        "learner:\n  model:\n    torso: [64, 64]\n    torso_mixture: {kind: soft_modular}\n"
    )
    assert parse_config(text).learner.model.torso_mixture is not None


def test_moore_with_more_experts_than_output_width_is_a_config_error() -> None:
    text = TASKS + (
        "learner:\n  model:\n    torso: [64, 3]\n    torso_mixture: {kind: moore, experts: 4}\n"
    )
    [line] = _problems(text)
    assert "learner.model.torso_mixture" in line and "moore" in line and "4 experts" in line


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


TUNE = """\
tracking: {wandb: {mode: disabled}}
tasks:
  - env: gymnasium/CartPole-v1
  - env: gymnasium/InvertedPendulum-v5
    target_score: 950
tune:
  metric: normalized_score
  search:
    learner.learning_rate: {log_uniform: [1.0e-4, 1.0e-3]}
"""


def test_validate_refuses_normalized_score_over_tasks_without_reference_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, TUNE)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    [line] = err
    assert line.startswith(f"{path}:7: tune.metric:")  # the line of `metric:`
    assert "gymnasium/InvertedPendulum-v5" in line and "gymnasium/CartPole-v1" not in line
    assert "target" in line and "return" in line  # what to use instead


def test_validate_accepts_normalized_score_where_every_task_has_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = TUNE.replace("  - env: gymnasium/InvertedPendulum-v5\n    target_score: 950\n", "")
    assert main(["validate", str(_write(tmp_path, text))]) == 0, capsys.readouterr().err


def test_an_env_of_a_plugin_in_its_own_venv_says_where_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "tasks:\n" + "".join(f"  - env: metaworld/reach-v3\n    name: r{i}\n" for i in range(3))
    path = _write(tmp_path, text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert sum("unknown env id 'metaworld/reach-v3'" in line for line in err) == 3
    hints = [line for line in err if ".venv-metaworld" in line]
    assert len(hints) == 1 and "scripts/metaworld_tests.sh" in hints[0], err
