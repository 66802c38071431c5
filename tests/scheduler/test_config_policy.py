"""scheduler.policy is checked against the registered policy names, with a did-you-mean."""

from __future__ import annotations

import pytest

from mtrl.config import parse_config
from mtrl.errors import ConfigError
from mtrl.scheduler import Budget

HEAD = "tasks:\n  - env: a/b\nscheduler:\n"


def _problems(text: str, **kw: object) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "exp.yaml", **kw)
    return err.value.problems


def test_typo_gets_a_did_you_mean() -> None:
    assert _problems(HEAD + "  policy: balance\n") == [
        "exp.yaml:4: scheduler.policy: Input should be a registered scheduling policy, not "
        "'balance'; did you mean 'balanced'?"
    ]


def test_third_party_policy_needs_the_registry_names() -> None:
    text = HEAD + "  policy: greedy\n"
    assert "known: balanced, fixed, progress" in _problems(text)[0]
    cfg = parse_config(text, scheduler_policies=["fixed", "greedy"])
    assert cfg.scheduler.policy == "greedy"
    assert (
        "known: fixed" in _problems(HEAD + "  policy: balanced\n", scheduler_policies=["fixed"])[0]
    )


def test_new_fields_are_constrained_and_feed_the_budget() -> None:
    text = HEAD + "  num_actors: 64\n  min_actors_per_task: 2\n  progress_floor: 0.5\n"
    budget = Budget.from_config(parse_config(text).scheduler)
    assert budget == Budget(slots=64, min_per_task=2, floor_share=0.5)
    assert "progress_floor" in _problems(HEAD + "  progress_floor: 1.5\n")[0]
    assert "warmup_s" in _problems(HEAD + "  warmup_s: -1\n")[0]
    assert "stats_window" in _problems(HEAD + "  stats_window: 2\n")[0]
