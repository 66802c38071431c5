"""Named callables offered by plugins (scheduling policies, metric trackers): the registrar a
hook receives, the registry of all, and the checks both share.

The plugin layer stores the callables as opaque objects and only checks their shape; what they
mean is defined by the package that uses them (:mod:`mtrl.scheduler`, :mod:`mtrl.tracking`),
which imports this layer and never the reverse. Each kind is a small subclass that names the
noun, the callable's arguments and the spec type.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from mtrl.errors import PluginError
from mtrl.names import unknown_name_message

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")


class Spec(Protocol):
    name: str
    plugin: str


S = TypeVar("S", bound=Spec)


class NamedRegistry(Generic[S]):
    """Names of every loaded plugin's offerings of one kind (one flat namespace, first
    registration wins). Subclasses set ``noun``, ``unknown_error`` and ``none_known``."""

    noun: ClassVar[str]
    unknown_error: ClassVar[type[Exception]]
    none_known: ClassVar[str] = "(none)"

    def __init__(self) -> None:
        self._specs: dict[str, S] = {}

    def add(self, spec: S) -> None:
        if spec.name in self._specs:
            other = self._specs[spec.name].plugin
            raise PluginError(
                f"{self.noun} {spec.name!r} is already registered by plugin {other!r}"
            )
        self._specs[spec.name] = spec

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[S]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> list[str]:
        return list(self._specs)

    def get(self, name: str) -> S:
        try:
            return self._specs[name]
        except KeyError:
            msg = unknown_name_message(self.noun, name, self._specs, self.none_known)
            raise self.unknown_error(msg) from None


class NamedRegistrar(Generic[S]):
    """Collects one plugin's offerings of one kind; malformed ones become ``problems``.
    Subclasses set ``noun``, ``what`` (the callable's role), ``arguments`` (its positional
    parameters) and ``make_spec``, and expose :meth:`_register` under the hook's name."""

    noun: ClassVar[str]
    what: ClassVar[str]
    arguments: ClassVar[tuple[str, ...]]

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.specs: list[S] = []
        self.problems: list[str] = []

    def make_spec(self, name: str, obj: Callable[..., Any], description: str) -> S:
        raise NotImplementedError

    def _register(
        self,
        name: str,
        obj: Callable[..., Any],
        description: str,
        arguments: tuple[str, ...] | None = None,
    ) -> None:
        """Add ``obj`` under ``name``, or record why not; ``arguments`` overrides the class's
        positional parameters (a tracker with settings takes one more)."""
        problem = self._check(name, obj, description, arguments or self.arguments)
        if problem:
            self.problems.append(f"{self.noun} {name!r}: {problem}")
            return
        self.specs.append(self.make_spec(name, obj, description))

    def _check(
        self, name: Any, obj: Any, description: Any, arguments: tuple[str, ...]
    ) -> str | None:
        if not isinstance(name, str) or not _NAME.match(name):
            return "name must start with a letter and hold only letters, digits, '_', '.' and '-'"
        if not callable(obj):
            return f"{self.what} must be callable, got {type(obj).__name__}"
        if not isinstance(description, str):
            return f"description must be a string, got {type(description).__name__}"
        n = len(arguments)
        try:
            inspect.signature(obj).bind(*[None] * n)
        except TypeError:
            count = {2: "two", 3: "three", 4: "four"}.get(n, str(n))
            args = ", ".join(arguments)
            return f"{self.what} must accept {count} positional arguments ({args})"
        except ValueError:
            pass  # no introspectable signature (some builtins): trust it
        return None
