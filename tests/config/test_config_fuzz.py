"""Fuzzing ``mtrl validate``: whatever the config file holds, it exits 0 or 2 with one line per
problem, never a traceback.

The inputs start from the shipped configs (configs/*.yaml): their data mutated (wrong types,
bad numbers, unknown, missing and misplaced keys, list entries deleted or duplicated), their
text and bytes mutated (YAML syntax, tags, anchors, stray bytes), raw random bytes, and
documents built to hit the limits of :mod:`mtrl.config.safe_yaml` (deep nesting, alias bombs,
tagged and number-like scalars, long strings). The runs are derandomized (the same examples in
every CI run) and write no example database; per-example time is bounded by a deadline.
"""

from __future__ import annotations

import contextlib
import copy
import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from mtrl.cli import main
from mtrl.config import ExperimentConfig

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))
TEXTS = [p.read_bytes() for p in CONFIGS]
DATA = [yaml.safe_load(t) for t in TEXTS]

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=5000,  # ms per example: bounded time even on a loaded CI machine
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _field_names(model: type[BaseModel], seen: set[str]) -> set[str]:
    """Every key of every config model, to put known keys in the wrong places."""
    for name, field in model.model_fields.items():
        seen.add(name)
        for kind in (field.annotation, *getattr(field.annotation, "__args__", ())):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                _field_names(kind, seen)
    return seen


FIELDS = sorted(_field_names(ExperimentConfig, set()) | {"type", "envs", "task"})


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One file the examples overwrite. One validation first loads the plugins and everything
    ``mtrl validate`` imports lazily, so that no example pays for it against the deadline."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["validate", str(CONFIGS[0])]) == 0
    return tmp_path_factory.mktemp("fuzz") / "config.yaml"


def _validate_cleanly(path: Path, content: bytes) -> None:
    """Run ``mtrl validate`` on ``content``: exit 0 or 2, and every line it prints names the
    file (or is a CLI ``error:``), with no traceback."""
    path.write_bytes(content)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["validate", str(path)])
    errors = err.getvalue().splitlines()
    assert rc in (0, 2), (rc, errors)
    assert "Traceback" not in err.getvalue()
    assert (rc == 2) == bool(errors), (rc, errors)
    for line in errors:
        assert line.startswith((f"{path}:", f"{path} ", "error:")), line
        assert len(line) <= len(str(path)) + 450, line[:200]
    for line in out.getvalue().splitlines():
        assert line.startswith(f"{path}: "), line


# -- values and keys that a config may wrongly hold ------------------------------------------

_SCALARS = st.one_of(
    st.integers(),
    st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**40]),
    st.floats(),  # nan, inf, -0.0, subnormals
    st.text(max_size=12),
    st.sampled_from(["", "1e6", "2.5e5", "nan", "-inf", "yes", "null", "0x1F", "1_000", "1:30"]),
    st.sampled_from(["gymnasium/CartPole-v1", "gymnasium/CartPol-v1", "cpu", "cuda:99", "auto"]),
    st.booleans(),
    st.none(),
    st.integers(0, 30_000).map(lambda n: "x" * n),
)
_VALUES = st.one_of(
    _SCALARS,
    st.lists(_SCALARS, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=6)), _SCALARS, max_size=4),
)
_KEYS = st.one_of(
    st.sampled_from(FIELDS), st.text(max_size=12), st.integers(), st.booleans(), st.none()
)


def _containers(node: Any) -> list[Any]:
    """Every mapping and list in ``node``, itself first."""
    found = [node]
    children = node.values() if isinstance(node, dict) else node
    for child in children:
        if isinstance(child, (dict, list)):
            found += _containers(child)
    return found


def _typo(key: Any) -> Any:
    text = str(key)
    return text[:-1] if len(text) > 1 else text + "_"


def _mutate(data: st.DataObject, doc: Any) -> None:
    """One mutation at a random mapping or list of ``doc``, in place."""
    where = data.draw(st.sampled_from(_containers(doc)))
    subtree = data.draw(st.sampled_from(_containers(data.draw(st.sampled_from(DATA)))))
    value = data.draw(st.one_of(_VALUES, st.just(copy.deepcopy(subtree))))
    if isinstance(where, dict):
        op = data.draw(st.sampled_from(["set", "delete", "add", "rename"]))
        if op == "add" or not where:
            where[data.draw(_KEYS)] = value
            return
        key = data.draw(st.sampled_from(list(where)))
        if op == "set":
            where[key] = value
        elif op == "delete":
            del where[key]
        else:
            where[_typo(key)] = where.pop(key)
    else:
        op = data.draw(st.sampled_from(["set", "delete", "duplicate", "append", "clear"]))
        if op == "append" or not where:
            where.append(value)
            return
        i = data.draw(st.integers(0, len(where) - 1))
        if op == "set":
            where[i] = value
        elif op == "delete":
            del where[i]
        elif op == "duplicate":
            where.insert(i, copy.deepcopy(where[i]))
        else:
            where.clear()


@settings(FUZZ, max_examples=400)
@given(data=st.data())
def test_mutated_config_data(config_file: Path, data: st.DataObject) -> None:
    doc = copy.deepcopy(data.draw(st.sampled_from(DATA)))
    for _ in range(data.draw(st.integers(1, 4))):
        _mutate(data, doc)
    flow = data.draw(st.booleans())
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=flow, allow_unicode=True)
    _validate_cleanly(config_file, text.encode())


# -- text and bytes ----------------------------------------------------------------------------

_FRAGMENTS = [
    *(b"[", b"]", b"{", b"}", b": ", b"- ", b"? ", b"\n", b"\t", b"  ", b",", b"#", b"'", b'"'),
    *(b"&a ", b"*a", b"*b", b"&a [*a]", b"<<: *a\n", b"<<: {x: 1}\n", b"|\n", b">-\n"),
    *(b"!!python/object/apply:os.system ['true'] ", b"!!python/name:os.system ", b"!foo "),
    *(b"!!binary ", b"!!set ", b"!!omap ", b"!!pairs ", b"!!timestamp ", b"!!int ", b"!!float "),
    *(b"!!bool ", b"!!null ", b"!!str ", b"!!map ", b"!!seq ", b"!<tag:yaml.org,2002:int> "),
    *(b"%YAML 1.1\n---\n", b"%YAML 2.0\n", b"%TAG ! tag:x,1:\n", b"---\n", b"...\n"),
    *(b"2001-13-01", b"2001-02-30 25:61:61", b"190:20:30", b"0b102", b"0o78", b"0x", b"1e6"),
    *(b".nan", b"-.inf", b"~", b"\xff", b"\x00", b"\xef\xbb\xbf", b"\xc3", b"\xe2\x80\xa8", b"\r"),
    b"9" * 5000,
]


@settings(FUZZ, max_examples=300)
@given(data=st.data())
def test_mutated_config_text(config_file: Path, data: st.DataObject) -> None:
    text = bytearray(data.draw(st.sampled_from(TEXTS)))
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(text)))
        span = data.draw(st.integers(0, 40))
        op = data.draw(st.sampled_from(["insert", "bytes", "delete", "copy", "repeat"]))
        if op == "insert":
            text[at:at] = data.draw(st.sampled_from(_FRAGMENTS))
        elif op == "bytes":
            text[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del text[at : at + span]
        elif op == "copy":
            to = data.draw(st.integers(0, len(text)))
            text[to:to] = text[at : at + span]
        else:
            text[at:at] = text[at : at + span] * data.draw(st.integers(2, 200))
    _validate_cleanly(config_file, bytes(text))


@settings(FUZZ, max_examples=150)
@given(prefix=st.sampled_from([b"", b"tasks:\n  - ", b"tasks: ", b"name: "]), raw=st.binary())
def test_random_bytes(config_file: Path, prefix: bytes, raw: bytes) -> None:
    _validate_cleanly(config_file, prefix + raw)


# -- documents built to hit the limits ---------------------------------------------------------


def _deep(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + "1" + "]" * depth
    return "{a: " * depth + "1" + "}" * depth


def _alias_bomb(levels: int, width: int) -> str:
    """``[&a0 [1, 1], &a1 [*a0, *a0], ...]``: ``width ** levels`` nodes once expanded."""
    parts = [f"&a0 [{', '.join(['1'] * width)}]"]
    for i in range(1, levels):
        parts.append(f"&a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "[" + ", ".join(parts) + "]"


_TAGS = [
    *("!!python/object/apply:os.system", "!!python/tuple", "!!binary", "!!set", "!!omap"),
    *("!!pairs", "!!timestamp", "!!int", "!!float", "!!bool", "!!null", "!!str", "!!map"),
    *("!!seq", "!!merge", "!local", "!<tag:example.com,2000:x>"),
]
_ODD_SCALARS = [
    *("abc", "2001-13-01", "2001-12-14t21:59:43.10-25:00", "1:2:3", "1" * 5000, "0x" + "f" * 90),
    *("-0", ".NaN", "1e400", "1.0e+400", "''", "[1, 2]", "{a: 1}", "{a, b}", "[{a: 1}, b]"),
]


@st.composite
def _limit_values(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["deep", "bomb", "tagged", "long", "odd"]))
    if kind == "deep":
        return _deep(draw(st.integers(1, 120)), draw(st.sampled_from(["list", "map"])))
    if kind == "bomb":
        return _alias_bomb(draw(st.integers(1, 40)), draw(st.integers(1, 12)))
    if kind == "tagged":
        return f"{draw(st.sampled_from(_TAGS))} {draw(st.sampled_from(_ODD_SCALARS))}"
    if kind == "long":
        return "'" + "y" * draw(st.integers(0, 60_000)) + "'"
    return draw(st.sampled_from(_ODD_SCALARS))


_TEMPLATES = [
    "tasks:\n  - env: gymnasium/CartPole-v1\n    {key}: {value}\n",
    "tasks:\n  - env: gymnasium/CartPole-v1\n    env_kwargs: {{{key}: {value}}}\n",
    "{key}: {value}\ntasks:\n  - env: gymnasium/CartPole-v1\n",
    "tasks: {value}\n",
    "learner: {{model: {{{key}: {value}}}}}\ntasks: [{{env: gymnasium/CartPole-v1}}]\n",
    "{value}\n",
    "? {value}\n: 1\ntasks: [{{env: gymnasium/CartPole-v1}}]\n",
]


@settings(FUZZ, max_examples=250)
@given(
    template=st.sampled_from(_TEMPLATES),
    key=st.sampled_from(FIELDS),
    value=_limit_values(),
)
def test_documents_at_the_limits(config_file: Path, template: str, key: str, value: str) -> None:
    _validate_cleanly(config_file, template.format(key=key, value=value).encode())


def _deep_block(depth: int, kind: str) -> str:
    """Block collections ``depth`` deep: ``- - - 1`` or ``k:`` indented under ``k:``."""
    if kind == "list":
        return "tasks:\n  " + "- " * depth + "1\n"
    return "".join(" " * i + "k:\n" for i in range(depth)) + " " * depth + "1\n"


@settings(FUZZ, max_examples=40)
@given(depth=st.integers(1, 300), kind=st.sampled_from(["list", "map"]))
def test_deep_block_nesting(config_file: Path, depth: int, kind: str) -> None:
    _validate_cleanly(config_file, _deep_block(depth, kind).encode())
