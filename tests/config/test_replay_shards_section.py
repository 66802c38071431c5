"""``replay.shards`` parses and validates: off by default, its rate limiter's settings checked,
and a config that asks for shards without Ray actors refused in one line (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtrl.config import parse_config
from mtrl.errors import ConfigError
from tests.algorithms.test_rule_settings import _mtrl

HEAD = "tasks:\n  - env: gymnasium/CartPole-v1\nlearner: {algorithm: sac}\n"


def test_off_by_default_and_parsed_with_ray_actors() -> None:
    assert parse_config(HEAD).replay.shards is None
    cfg = parse_config(
        HEAD + "actors: {mode: ray}\nreplay:\n  shards: {count: 4, layout: per_task, "
        "rate_limit: {samples_per_insert: 2, waits: actors}}\n"
    )
    shards = cfg.replay.shards
    assert shards is not None and shards.count == 4 and shards.layout == "per_task"
    assert shards.rate_limit is not None and shards.rate_limit.waits == "actors"


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ("{count: 0}", "greater than 0"),
        ("{layout: striped}", "'mixed' or 'per_task'"),
        ("{rate_limit: {samples_per_insert: -1}}", "greater than 0"),
        ("{rate_limit: {samples_per_insert: 1, waits: nobody}}", "'learner' or 'actors'"),
    ],
)
def test_bad_settings_are_refused(section: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(HEAD + f"actors: {{mode: ray}}\nreplay: {{shards: {section}}}\n")
    assert words in str(err.value)


def test_shards_without_ray_actors_are_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(HEAD + "actors: {mode: process}\nreplay: {shards: {count: 2}}\n")
    done = _mtrl(tmp_path, "validate", str(path))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "replay.shards needs actors.mode: ray" in line
    assert "Traceback" not in done.stdout + done.stderr
