"""Did-you-mean for a value outside a field's fixed choices (``actors.mode: rays``).

The guess is the env-id suggester's (:func:`mtrl.names.suggest_env_ids`): a close spelling, or
the same word in another case (``Adam`` for ``adam``); a value like none of the choices gets no
guess, and the message's list of allowed values stands alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pydantic_core import PydanticCustomError

from mtrl.names import suggest_env_ids

__all__ = ["choice_error_hint", "closest_choice", "did_you_mean", "require_registered"]

_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
"""A quoted value in pydantic's ``expected`` list (``'serial', 'process' or 'ray'``)."""


def closest_choice(value: Any, options: Iterable[str]) -> str | None:
    """The one of ``options`` that ``value`` most likely meant, or None."""
    if not isinstance(value, str) or not value:
        return None
    hint = suggest_env_ids(value, [o for o in options if o != value], n=1)
    return hint[0] if hint else None


def did_you_mean(value: Any, options: Iterable[str]) -> str:
    """``"; did you mean 'ray'?"`` for ``value`` close to one of ``options``, else ``""``."""
    hint = closest_choice(value, options)
    return f"; did you mean {hint!r}?" if hint else ""


def choice_error_hint(err: dict[str, Any]) -> str:
    """The did-you-mean of a pydantic ``literal_error`` / ``enum`` error, from the choices its
    ``ctx.expected`` lists; ``""`` for other errors."""
    if err.get("type") not in ("literal_error", "enum"):
        return ""
    expected = str((err.get("ctx") or {}).get("expected", ""))
    return did_you_mean(err.get("input"), (a or b for a, b in _QUOTED.findall(expected)))


def require_registered(value: str, known: Iterable[str], what: str, code: str) -> str:
    """``value`` if it is one of the ``known`` names a plugin registered (a scheduling policy,
    a learning rule); else the validation error ``"Input should be a registered <what>, not
    '<value>'; did you mean ...?"`` (or the known names when none is close)."""
    names = sorted(known)
    if value in names:
        return value
    hint = closest_choice(value, names)
    fix = f"did you mean {hint!r}?" if hint else f"known: {', '.join(names) or '-'}"
    raise PydanticCustomError(
        code,
        "Input should be a registered {what}, not '{value}'; {fix}",
        {"what": what, "value": value, "fix": fix},
    )
