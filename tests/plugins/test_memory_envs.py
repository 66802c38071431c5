"""The built-in ``memory`` plugin: CueRecall shows its cue only at the first step, pays for
naming it only at the query, and is a conforming batch env (tensor-native, so Anakin-ready)."""

from __future__ import annotations

import numpy as np
import pytest

from mtrl.plugins import get_plugins, make_env
from mtrl.testing import check_env

ENV = "memory/CueRecall-v0"


def test_registered_as_a_builtin_with_declared_spaces_and_scores() -> None:
    spec = get_plugins().envs.get(ENV)
    assert spec.observation_space.shape == (3,) and spec.action_space.n == 2
    assert (spec.random_score, spec.reference_score) == (0.0, 1.0)
    assert get_plugins().infos["memory"].builtin


def test_conformance() -> None:
    report = check_env(ENV, steps=40, env_kwargs={"delay": 1})
    assert {"build", "spaces", "auto-reset", "seeding"} <= set(report.checks)


@pytest.mark.parametrize("delay", [0, 3])
def test_the_cue_is_seen_once_and_named_at_the_query(delay: int) -> None:
    env = make_env(ENV, 64, seed=0, delay=delay)
    obs = env.reset()
    cue = obs[:, :2].argmax(1)
    assert (obs[:, :2].sum(1) == 1).all() and (obs[:, 2] == 0).all()
    assert 0 < cue.mean() < 1, "both cues occur"
    answer = np.where(np.arange(64) % 2 == 0, cue, 1 - cue)  # even copies right, odd wrong
    for t in range(delay + 1):
        out = env.step(answer)
        assert not out.terminated.any() and (out.reward == 0).all()
        query = t == delay
        assert (out.obs[:, :2] == 0).all(), "blank after the first step"
        assert (out.obs[:, 2] == float(query)).all()
    out = env.step(answer)
    assert out.terminated.all() and not out.truncated.any()
    np.testing.assert_array_equal(out.reward, np.where(np.arange(64) % 2 == 0, 1.0, -1.0))
    reset = env.step(answer)  # the reset step: a new cue, reward 0
    assert (reset.reward == 0).all() and (reset.obs[:, :2].sum(1) == 1).all()


def test_a_bad_delay_is_named() -> None:
    with pytest.raises(ValueError, match="delay must be an integer"):
        make_env(ENV, 2, delay=-1)
