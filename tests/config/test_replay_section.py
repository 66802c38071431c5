"""The ``replay:`` section every replay-based rule reads: it parses and validates (file:line for
a bad key or value), reaches the learner config, and the rules' old replay keys are refused in
``mtrl validate`` and ``mtrl train`` with one line naming where each went."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtrl.config import LearnerConfig, parse_config
from mtrl.config.replay import ReplayConfig
from mtrl.errors import ConfigError
from mtrl.plugins import get_plugins
from tests.algorithms.test_rule_settings import _mtrl

HEAD = "tasks:\n  - env: gymnasium/CartPole-v1\n"


def _parse(text: str) -> object:
    return parse_config(text, "c.yaml", **get_plugins().config_context())


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        _parse(text)
    return err.value.problems


def test_the_section_parses_and_reaches_the_learner_config() -> None:
    cfg = _parse(
        HEAD + "learner: {algorithm: sac}\n"
        "replay:\n  capacity: 5000\n  sampler: prioritized\n  priority_alpha: 0.7\n"
        "  priority_beta: 0.5\n"
    )
    want = ReplayConfig(capacity=5000, sampler="prioritized", priority_alpha=0.7, priority_beta=0.5)
    assert cfg.replay == want  # type: ignore[attr-defined]
    assert cfg.learner.replay == want and cfg.learner.replay.prioritized  # type: ignore[attr-defined]
    plain = _parse(HEAD)
    assert plain.replay == ReplayConfig() == plain.learner.replay  # type: ignore[attr-defined]
    assert not plain.replay.prioritized and plain.replay.capacity is None  # type: ignore[attr-defined]
    assert LearnerConfig().replay == ReplayConfig(), "a learner config built alone: defaults"


def test_a_null_capacity_is_the_rules_own_default() -> None:
    assert ReplayConfig().capacity_or(1_000_000) == 1_000_000
    assert ReplayConfig(capacity=7).capacity_or(1_000_000) == 7


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("capacity: 0", "c.yaml:4: replay.capacity: Input should be greater than 0 (got 0)"),
        ("sampler: greedy", "c.yaml:4: replay.sampler: Input should be 'uniform' or"),
        ("priority_beta: 2", "c.yaml:4: replay.priority_beta: Input should be less than or"),
        ("capacty: 10", "c.yaml:4: replay.capacty: unknown key 'capacty'; did you mean"),
    ],
)
def test_a_bad_key_or_value_is_one_line_with_file_and_line(section: str, expected: str) -> None:
    (line,) = _problems(HEAD + f"replay:\n  {section}\n")
    assert line.startswith(expected), line


def test_impala_replay_refuses_prioritized_sampling_in_one_line() -> None:
    (line,) = _problems(
        HEAD + "learner:\n  algorithm: impala_replay\nreplay:\n  sampler: prioritized\n"
    )
    assert line.startswith("c.yaml:4: learner.algorithm: learning rule 'impala_replay' draws")
    assert "replay.sampler: uniform" in line
    ok = _parse(HEAD + "learner:\n  algorithm: sac\nreplay:\n  sampler: prioritized\n")
    assert ok.replay.prioritized  # type: ignore[attr-defined]


#: Each old key, the section text that sets it, and where it went.
OLD_KEYS = {
    "learner.sac.replay_capacity": ("sac", "replay_capacity: 5000", "replay.capacity"),
    "learner.sac.prioritized": ("sac", "prioritized: true", "replay.sampler: prioritized"),
    "learner.sac.priority_alpha": ("sac", "priority_alpha: 0.5", "replay.priority_alpha"),
    "learner.sac.priority_beta": ("sac", "priority_beta: 0.5", "replay.priority_beta"),
    "learner.impala_replay.capacity": ("impala_replay", "capacity: 5000", "replay.capacity"),
}


def _old(rule: str, key: str) -> str:
    return HEAD + f"learner:\n  algorithm: {rule}\n  {rule}:\n    {key}\n"


@pytest.mark.parametrize("old", list(OLD_KEYS))
def test_an_old_key_names_where_it_moved(old: str) -> None:
    rule, key, new = OLD_KEYS[old]
    assert _problems(_old(rule, key)) == [f"c.yaml:6: {old}: moved to {new} " + _why(rule)]


def _why(rule: str) -> str:
    same = "; the same env steps per task" if rule == "impala_replay" else ""
    return f"(the top-level replay: section every replay-based rule reads{same})"


def test_an_old_key_of_a_config_read_without_the_rules_models_names_it_when_built() -> None:
    """A config read without the plugins keeps the section as a mapping; the rule validates it
    when the learner is built, with the same words."""
    cfg = parse_config(_old("sac", "replay_capacity: 5000"))
    with pytest.raises(ConfigError) as err:
        get_plugins().algorithms.get("sac").resolve_settings(cfg.learner)
    assert str(err.value).startswith("learner.sac.replay_capacity: moved to replay.capacity")


@pytest.mark.parametrize("old", list(OLD_KEYS))
def test_validate_and_train_refuse_an_old_key_in_one_line(old: str, tmp_path: Path) -> None:
    rule, key, new = OLD_KEYS[old]
    path = tmp_path / "c.yaml"
    path.write_text(_old(rule, key) + f"tracking: {{run_dir: {tmp_path / 'runs'}}}\n")
    for command in ("validate", "train"):
        done = _mtrl(tmp_path, command, str(path))  # no plugin in tmp_path: mtrl's own
        assert done.returncode == 2, (command, done.stderr)
        (line,) = done.stderr.strip().splitlines()
        assert f"{path}:6: {old}: moved to {new}" in line, (command, line)
        assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "runs").exists()
