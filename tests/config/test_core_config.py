"""``learner.model.core``: off by default, a shorthand and a mapping, and messages that say what
to write instead."""

from __future__ import annotations

import pytest

from mtrl.config import CoreConfig, parse_config
from mtrl.errors import ConfigError


def _core(value: str) -> CoreConfig | None:
    text = f"tasks: [{{env: gymnasium/CartPole-v1}}]\nlearner:\n  model:\n    core: {value}\n"
    return parse_config(text, "cfg.yaml").learner.model.core


def test_off_by_default() -> None:
    cfg = parse_config("tasks: [{env: gymnasium/CartPole-v1}]\n")
    assert cfg.learner.model.core is None


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("lstm", CoreConfig(kind="lstm")),
        ("GRU", CoreConfig(kind="gru")),
        ("{kind: gru, hidden: 64, shared: false}", CoreConfig(kind="gru", hidden=64, shared=False)),
        ("none", None),
        ("null", None),
        ("off", None),
    ],
)
def test_shorthand_and_mapping(value: str, want: CoreConfig | None) -> None:
    assert _core(value) == want


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "lsmt",
            "learner.model.core: unknown recurrent core 'lsmt' (did you mean 'lstm'?): use lstm",
        ),
        ("{kind: rnn}", "learner.model.core.kind: Input should be 'lstm' or 'gru'"),
        ("{kind: lstm, hiden: 3}", "core.hiden: unknown key 'hiden'; did you mean 'hidden'?"),
        ("{kind: gru, hidden: 0}", "learner.model.core.hidden: Input should be greater than 0"),
        ("{hidden: 8}", "learner.model.core.kind: required key is missing"),
    ],
)
def test_bad_cores_are_named_with_their_line(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _core(value)
    assert str(err.value).startswith("cfg.yaml:4: ")
    assert message in str(err.value)
