"""Reading a config's YAML with bounded size, depth, aliases, time and memory.

Any bytes a user may hand to ``mtrl validate`` (a binary file, a UTF-16 file, a generated file
nested 5,000 levels deep, a billion-laughs alias bomb) must end in a :class:`ConfigError` that
names the file and, where there is one, the line, never in a traceback, a hang or a blown
stack. Hence explicit limits, each with a message that names it:

* :data:`MAX_CONFIG_BYTES`: the file is read at most one byte past it, never whole;
* UTF-8 text only, without the control characters YAML forbids (NUL and the like);
* :data:`MAX_DEPTH`: nesting of collections, aliases expanded, checked while composing, so
  PyYAML's recursive composer never runs deep;
* :data:`MAX_NODES`: nodes of the document with every alias expanded, so an alias bomb is
  refused before anything walks it; aliases that contain themselves are refused too;
* :data:`MAX_NUMBER_CHARS`: the length of a number, whose conversion can be quadratic
  (YAML 1.1's base-60 ints) or refused by Python (ints over 4,300 digits).

Loading is safe (no Python tags), and duplicate keys and merge keys (``<<``) are errors.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.scanner import ScannerError

from mtrl.errors import ConfigError

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_NUMBER_CHARS",
    "compose_config",
    "read_config_text",
]

MAX_CONFIG_BYTES = 256 * 1024
"""Largest config file read (and longest config text parsed). A config lists tasks and a few
dozen settings: even a hundred tasks with their env kwargs take a few tens of KiB, while the
pure-Python YAML parser (the one that gives line numbers) takes seconds per MiB."""
MAX_DEPTH = 32
"""Deepest nesting of mappings and lists, aliases expanded (the shipped configs nest 4 deep)."""
MAX_NODES = 20_000
"""Most YAML nodes (keys, values, list items) in a config, every alias expanded."""
MAX_NUMBER_CHARS = 100
"""Longest number, in characters."""

_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
_MERGE_TAG = "tag:yaml.org,2002:merge"
# The characters YAML 1.1 forbids in a stream (PyYAML's Reader refuses them with a
# multi-line message and a character offset; this check gives the line and column).
_NOT_PRINTABLE = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)
_CONTROL_NAMES = {"\x00": "NUL", "\x1b": "ESC", "\x7f": "DEL", "\x08": "backspace"}


def _size_words(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} bytes"


def read_config_text(path: Path) -> str:
    """The UTF-8 text of the config file at ``path``; at most :data:`MAX_CONFIG_BYTES` + 1
    bytes are read, whatever the file (a huge log, ``/dev/zero``)."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config: {e.strerror or e}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{path}: the file is larger than {_size_words(MAX_CONFIG_BYTES)}, the limit of a "
            "config: is it the right file?"
        )
    return decode_config(raw, str(path))


def decode_config(raw: bytes, source: str) -> str:
    """``raw`` as UTF-8 text (a leading byte-order mark is allowed), or a ConfigError that
    names the first bad byte, its offset and its line."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        hint = ""
        if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
            hint = "; it looks like UTF-16: save it as UTF-8"
        byte = f"byte 0x{raw[e.start]:02x} at offset {e.start}"
        raise ConfigError(f"{source}:{line}: not UTF-8 text ({byte}){hint}") from None


def check_text(text: str, source: str) -> None:
    """Refuse text over the size limit or with characters YAML does not allow."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{source}: the config is longer than {_size_words(MAX_CONFIG_BYTES)}, the limit "
            "of a config"
        )
    bad = _NOT_PRINTABLE.search(text)
    if bad is not None:
        char = bad.group()
        line = text.count("\n", 0, bad.start()) + 1
        column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        name = _CONTROL_NAMES.get(char, "control character")
        raise ConfigError(
            f"{source}:{line}:{column}: invalid YAML: {name} (U+{ord(char):04X}) is not "
            "allowed in a config; is it a text file?"
        )


class _ConfigLoader(yaml.SafeLoader):
    """Safe loader with the limits of this module and unique keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0
        self._open_anchors: set[str] = set()
        self._size: dict[int, int] = {}  # id(node) → nodes below it, aliases expanded
        self._height: dict[int, int] = {}  # id(node) → levels below it, aliases expanded

    def fetch_flow_collection_start(self, token_class: type[yaml.Token]) -> None:
        """Stop at a ``[`` or ``{`` past the depth limit as the scanner reads it: the scanner
        reads a few hundred tokens ahead of the composer, with work quadratic in the nesting."""
        if self.flow_level >= MAX_DEPTH:
            raise ScannerError(
                None, None, f"nested deeper than {MAX_DEPTH} levels, the limit", self.get_mark()
            )
        super().fetch_flow_collection_start(token_class)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        """Compose one node, counting nodes and levels with aliases expanded."""
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None:  # an undefined alias is PyYAML's error
                self._alias(event, target)
            return super().compose_node(parent, index)
        if self._depth >= MAX_DEPTH:
            raise ComposerError(
                None, None, f"nested deeper than {MAX_DEPTH} levels, the limit", event.start_mark
            )
        anchor = event.anchor
        if anchor is not None:
            self._open_anchors.add(anchor)
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
            self._open_anchors.discard(anchor)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        self._size[id(node)] = 1 + sum(self._size[id(c)] for c in children)
        self._height[id(node)] = 1 + max((self._height[id(c)] for c in children), default=0)
        self._count(1, event.start_mark)
        return node

    def _alias(self, event: yaml.AliasEvent, target: yaml.Node) -> None:
        """Refuse an alias inside its own anchor, or one that nests or grows past a limit."""
        if event.anchor in self._open_anchors:
            raise ComposerError(
                None,
                None,
                f"alias *{event.anchor} is inside its own anchor &{event.anchor} (a cycle)",
                event.start_mark,
            )
        if self._depth + self._height[id(target)] > MAX_DEPTH:
            raise ComposerError(
                None,
                None,
                f"alias *{event.anchor} nests deeper than {MAX_DEPTH} levels, the limit",
                event.start_mark,
            )
        self._count(self._size[id(target)], event.start_mark)

    def _count(self, nodes: int, mark: yaml.Mark) -> None:
        self._nodes += nodes
        if self._nodes > MAX_NODES:
            raise ComposerError(
                None,
                None,
                f"more than {MAX_NODES:,} YAML nodes (aliases expanded), the limit of a config",
                mark,
            )

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """PyYAML's constructors raise plain Python errors on some scalars (``2001-13-01``,
        ``!!int abc``, ``!!bool x``): make each a YAML error at the node's line."""
        if (
            isinstance(node, yaml.ScalarNode)
            and node.tag in _NUMBER_TAGS
            and len(node.value) > MAX_NUMBER_CHARS
        ):
            raise ConstructorError(
                None,
                None,
                f"a number of {len(node.value):,} characters; at most {MAX_NUMBER_CHARS} are "
                "allowed",
                node.start_mark,
            )
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, LookupError, AttributeError, ArithmeticError) as e:
            # ValueError says why (``month must be in 1..12``); the others name PyYAML's insides.
            tag = node.tag.removeprefix("tag:yaml.org,2002:")
            what = _short(node.value) if isinstance(node, yaml.ScalarNode) else f"a {node.id}"
            why = _one_line(str(e)) if isinstance(e, ValueError) else ""
            raise ConstructorError(
                None,
                None,
                f"{what} is not a valid {tag}" + (f" ({why})" if why else ""),
                node.start_mark,
            ) from None


def _construct_mapping(loader: _ConfigLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    """A mapping whose keys are unique and hashable (PyYAML keeps the last of duplicates)."""
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:
            raise ConstructorError(
                None,
                None,
                "merge keys (`<<`) are not supported in a config: write the keys out",
                key_node.start_mark,
            )
        key = loader.construct_object(key_node, deep=deep)
        try:
            first = seen.get(key)
        except TypeError:
            raise ConstructorError(
                None,
                None,
                f"a {type(key).__name__} cannot be a key; keys are names",
                key_node.start_mark,
            ) from None
        if first is not None:
            raise ConstructorError(
                None,
                None,
                f"duplicate key {_short(key)} (first on line {first + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_ConfigLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value) if not isinstance(value, str) or len(value) <= limit else None
    if text is None:
        text = repr(value[: limit // 2]) + f"…({len(value):,} characters)"
    return text if len(text) <= limit * 2 else text[: limit * 2] + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def compose_config(text: str, source: str) -> tuple[yaml.Node | None, Any]:
    """The YAML node tree of ``text`` (for line numbers) and the data it holds, within the
    limits of this module; every problem is a one-line ConfigError naming ``source``."""
    check_text(text, source)
    loader = None
    try:
        loader = _ConfigLoader(text)
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(e, "problem", None) or getattr(e, "context", None) or str(e)
        raise ConfigError(f"{where}: invalid YAML: {_one_line(problem)}") from None
    except (ValueError, TypeError, LookupError, AttributeError, ArithmeticError) as e:
        raise ConfigError(f"{source}: invalid YAML: {_one_line(str(e))}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return root, data
