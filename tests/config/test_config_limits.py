"""Bad config input gives one clean line per problem, within the limits of
:mod:`mtrl.config.safe_yaml`: bytes that are not UTF-8 text, huge files, deep nesting, alias
bombs, tags and scalars PyYAML fails on with a plain Python error. Each case here was a
traceback (or would have hung) before; the fuzz tests (test_config_fuzz.py) look for more."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mtrl.config import load_config, parse_config
from mtrl.config.lines import config_location
from mtrl.config.loading import MAX_LINE_CHARS, MAX_PROBLEMS
from mtrl.config.safe_yaml import MAX_CONFIG_BYTES, MAX_DEPTH, MAX_NODES
from mtrl.errors import ConfigError

TASK = "tasks: [{env: a/b}]\n"


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "c.yaml")
    assert all("\n" not in p for p in err.value.problems)
    return err.value.problems


def _file_problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_config(path)
    return err.value.problems


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            b"\xff\xfe\x00bad",
            "c.yaml:1: not UTF-8 text (byte 0xff at offset 0); it looks like UTF-16",
        ),
        (b"tasks:\n  - env: caf\xe9\n", "c.yaml:2: not UTF-8 text (byte 0xe9 at offset 19)"),
    ],
)
def test_bytes_that_are_not_utf8_name_the_byte_and_line(
    tmp_path: Path, raw: bytes, expected: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(raw)
    (problem,) = _file_problems(path)
    assert problem.startswith(f"{tmp_path}/{expected}"), problem


def test_a_utf8_byte_order_mark_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + TASK.encode())
    assert load_config(path).tasks[0].env == "a/b"


def test_control_characters_name_their_line_and_column() -> None:
    assert _problems(TASK + "name: a\x00b\n") == [
        "c.yaml:2:8: invalid YAML: NUL (U+0000) is not allowed in a config; is it a text file?"
    ]


def test_a_file_over_the_limit_is_not_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(TASK.encode() + b"#" * (50 * MAX_CONFIG_BYTES))
    (problem,) = _file_problems(path)
    assert (
        problem
        == f"{path}: the file is larger than 256 KiB, the limit of a config: is it the right file?"
    )
    assert "longer than 256 KiB" in _problems(TASK + "#" * MAX_CONFIG_BYTES)[0]


def test_a_directory_is_not_a_config(tmp_path: Path) -> None:
    assert _file_problems(tmp_path) == [f"{tmp_path}: cannot read config: Is a directory"]


@pytest.mark.parametrize(
    "nested",
    [
        "a: " + "[" * 5000 + "]" * 5000,
        "a: " + "{a: " * 5000 + "1" + "}" * 5000,
        "tasks:\n  " + "- " * 200 + "1\n",
        "".join(" " * i + "k:\n" for i in range(200)),
    ],
    ids=["flow-lists", "flow-maps", "block-lists", "block-maps"],
)
def test_deep_nesting_stops_at_the_limit(nested: str) -> None:
    (problem,) = _problems(nested)
    assert problem.endswith(f"invalid YAML: nested deeper than {MAX_DEPTH} levels, the limit")


def test_nesting_up_to_the_limit_loads() -> None:
    deep = "{a: " * (MAX_DEPTH - 4) + "1" + "}" * (MAX_DEPTH - 4)
    cfg = parse_config(f"tasks: [{{env: a/b, env_kwargs: {deep}}}]\n")
    assert "a" in cfg.tasks[0].env_kwargs


def _alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_before_anything_expands_it() -> None:
    (problem,) = _problems(_alias_bomb(9))  # 10**9 nodes once expanded
    assert f"more than {MAX_NODES:,} YAML nodes (aliases expanded)" in problem


def test_aliases_that_nest_past_the_limit_are_refused() -> None:
    chain = "[&a0 [1]" + "".join(f", &a{i} [*a{i - 1}]" for i in range(1, 40)) + "]"
    (problem,) = _problems(f"tasks: {chain}\n")
    assert f"nests deeper than {MAX_DEPTH} levels" in problem


def test_plain_aliases_still_work() -> None:
    text = "tasks:\n  - {env: a/x, env_kwargs: &kw {size: 3}}\n  - {env: a/y, env_kwargs: *kw}\n"
    cfg = parse_config(text)
    assert cfg.tasks[1].env_kwargs == {"size": 3}


@pytest.mark.parametrize("text", ["a: &a [1, *a]\n", "a: &a {b: *a}\n"])
def test_an_alias_inside_its_own_anchor_is_a_cycle(text: str) -> None:
    (problem,) = _problems(text)
    assert problem.startswith("c.yaml:1:") and "alias *a is inside its own anchor &a" in problem


def test_merge_keys_say_they_are_not_supported() -> None:
    (problem,) = _problems("base: &b {num_envs: 2}\ntasks:\n  - <<: *b\n    env: a/b\n")
    assert problem == (
        "c.yaml:3:5: invalid YAML: merge keys (`<<`) are not supported in a config: write the "
        "keys out"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2001-13-01", "c.yaml:2:7: invalid YAML: '2001-13-01' is not a valid timestamp (month"),
        ("!!int abc", "c.yaml:2:7: invalid YAML: 'abc' is not a valid int (invalid literal"),
        ("!!int ''", "c.yaml:2:7: invalid YAML: '' is not a valid int"),
        ("!!float x", "c.yaml:2:7: invalid YAML: 'x' is not a valid float"),
        ("!!bool x", "c.yaml:2:7: invalid YAML: 'x' is not a valid bool"),
        ("!!timestamp x", "c.yaml:2:7: invalid YAML: 'x' is not a valid timestamp"),
        ("!!map [1]", "c.yaml:2:7: invalid YAML: a sequence is not a valid map"),
        ("1" * 5000, "c.yaml:2:7: invalid YAML: a number of 5,000 characters; at most 100"),
        ("1" + ":59" * 5000, "c.yaml:2:7: invalid YAML: a number of 15,001 characters"),
        ("!!python/object/apply:os.system [true]", "c.yaml:2:7: invalid YAML: could not determine"),
    ],
)
def test_scalars_pyyaml_cannot_construct_are_yaml_errors(value: str, expected: str) -> None:
    (problem,) = _problems(f"{TASK}seed: {value}\n")
    assert problem.startswith(expected), problem


@pytest.mark.parametrize("text", ["{[1]: 2}\n", "? [a]\n: b\n", "? {a: 1}\n: b\n"])
def test_a_list_or_mapping_as_key_is_refused(text: str) -> None:
    (problem,) = _problems(text)
    assert "cannot be a key; keys are names" in problem


def test_a_key_with_a_line_break_stays_on_one_line() -> None:
    problems = _problems(TASK + '"a\\nb": 1\n')
    assert problems[0].startswith("c.yaml:2: ['a\\nb']: unknown key 'a\\nb'")


def test_huge_values_are_cut_in_messages() -> None:
    (problem,) = _problems(f"{TASK}seed: '{'9' * 100_000}'\n")
    assert len(problem) <= MAX_LINE_CHARS and "99...99" in problem
    (problem,) = _problems(f"{TASK}{'k' * 10_000}: 1\n")
    assert len(problem) <= MAX_LINE_CHARS


def test_many_problems_are_capped_with_a_count() -> None:
    problems = _problems(TASK + "".join(f"k{i}: 1\n" for i in range(MAX_PROBLEMS + 30)))
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[-1] == "c.yaml: … and 30 more problems"


def test_config_location_survives_a_file_that_broke_after_loading(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("a: " + "[" * 5000 + "]" * 5000)
    assert config_location(path, ("tasks", 0, "env")) == str(path)


# -- bounded memory and time -------------------------------------------------------------------

_WORST = {
    "huge.yaml": "tasks:\n" + "#" * (64 * MAX_CONFIG_BYTES),
    "flat.yaml": "tasks: [" + "1," * (MAX_CONFIG_BYTES // 2 - 8) + "1]\n",
    "deep.yaml": "a: " + "[" * (MAX_CONFIG_BYTES // 2 - 4) + "]" * (MAX_CONFIG_BYTES // 2 - 4),
    "bomb.yaml": _alias_bomb(30),
    "keys.yaml": TASK + "".join(f"k{i}: 1\n" for i in range(MAX_CONFIG_BYTES // 12)),
    "number.yaml": "seed: 1" + ":59" * (MAX_CONFIG_BYTES // 3 - 8) + "\n",
}
_RUNNER = textwrap.dedent(
    """
    import resource, sys, time
    limit = 768 * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from mtrl.config import load_config
    from mtrl.errors import ConfigError
    for path in sys.argv[1:]:
        start = time.perf_counter()
        try:
            load_config(path)
            print(path, "ok", round(time.perf_counter() - start, 2))
        except ConfigError as e:
            print(path, len(e.problems), round(time.perf_counter() - start, 2))
    """
)


def test_the_worst_inputs_run_in_bounded_memory_and_time(tmp_path: Path) -> None:
    """Each worst input under a 768 MiB address-space limit; all of them within two minutes
    even on a loaded machine (each takes about a second on an idle one)."""
    paths = []
    for name, text in _WORST.items():
        paths.append(tmp_path / name)
        paths[-1].write_text(text)
    res = subprocess.run(
        [sys.executable, "-c", _RUNNER, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    results = [line.split() for line in res.stdout.splitlines()]
    assert [r[0] for r in results] == [str(p) for p in paths]
    assert all(r[1] == "1" for r in results), results  # one problem each: a limit
