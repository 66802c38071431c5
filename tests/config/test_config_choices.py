"""A value outside a field's fixed choices (``actors.mode: rays``) gets a did-you-mean beside
the list of allowed values, on the one line that names the file, line and config path."""

from __future__ import annotations

import pytest

from mtrl.config import parse_config
from mtrl.errors import ConfigError


def _problem(snippet: str) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config(f"tasks:\n  - env: a/b\n{snippet}\n", "exp.yaml")
    (problem,) = err.value.problems
    return problem


@pytest.mark.parametrize(
    ("snippet", "path", "meant"),
    [
        ("actors: {mode: rays}", "actors.mode", "ray"),
        ("actors: {mode: Thread}", "actors.mode", "thread"),
        ("actors: {inference: lokal}", "actors.inference", "local"),
        ("tracking: {wandb: {mode: disable}}", "tracking.wandb.mode", "disabled"),
        ("learner: {optimizer: Adam}", "learner.optimizer", "adam"),
        ("learner: {model: {core: {kind: grux}}}", "learner.model.core.kind", "gru"),
        ("learner: {model: {core: lstn}}", "learner.model.core", "lstm"),
    ],
)
def test_a_near_miss_of_an_allowed_value_gets_a_did_you_mean(
    snippet: str, path: str, meant: str
) -> None:
    problem = _problem(snippet)
    assert problem.startswith(f"exp.yaml:3: {path}: "), problem
    assert f"did you mean {meant!r}?" in problem, problem
    assert "\n" not in problem


def test_the_allowed_values_are_still_listed() -> None:
    problem = _problem("actors: {mode: rays}")
    assert "'serial', 'process', 'thread' or 'ray' (got 'rays')" in problem, problem


@pytest.mark.parametrize(
    "snippet", ["actors: {mode: kubernetes}", "learner: {optimizer: 3}", "actors: {mode: [a]}"]
)
def test_a_value_like_none_of_them_gets_no_guess(snippet: str) -> None:
    assert "did you mean" not in _problem(snippet)
