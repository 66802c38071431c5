"""The recurrent core of the multi-task model (``learner.model.core``): LSTM or GRU, or none.

Off by default, which is the feed-forward model with its old parameter names, so checkpoints
written before the option existed still load. ``core: lstm`` (or ``gru``) is short for
``core: {kind: lstm}``; ``core: none`` (or null) turns it off.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PositiveInt, model_validator
from pydantic_core import PydanticCustomError

from mtrl.config.base import ConfigModel
from mtrl.config.choices import closest_choice

CORE_KINDS = ("lstm", "gru")
#: What the schema accepts besides a mapping: a kind, or the words for "no core".
CoreShorthand = Literal["lstm", "gru", "none", "off"]


class CoreConfig(ConfigModel):
    """A recurrent core after the shared torso: its features run through an LSTM or GRU cell
    over time, and the policy and value heads read the cell's output. The state is reset to
    zeros where an episode starts."""

    kind: Literal["lstm", "gru"]
    """``lstm`` (Hochreiter & Schmidhuber 1997; state ``(h, c)``) or ``gru`` (Cho et al. 2014;
    state ``h``): the cell that carries memory from step to step."""
    hidden: PositiveInt = Field(default=128, le=8192)
    """Width of the cell's output and of each state vector (the heads' input)."""
    shared: bool = True
    """One core for every task (after the shared torso); false: one core per task (its own
    memory, and a task-sharded learner places it with the task's encoder and heads)."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            if data.strip().lower() not in CORE_KINDS:
                raise PydanticCustomError(
                    "core_kind",
                    "unknown recurrent core '{kind}'{hint}: use lstm or gru (`core: lstm`, or a "
                    "mapping such as `kind: gru, hidden: 64, shared: false`), or none for the "
                    "feed-forward model",
                    {"kind": data, "hint": _core_hint(data)},
                )
            return {"kind": data.strip().lower()}
        return data


def _core_hint(kind: str) -> str:
    """`` (did you mean 'gru'?)`` for a near miss of a core kind (or of none), else ``""``."""
    hint = closest_choice(kind.strip(), (*CORE_KINDS, "none"))
    return f" (did you mean {hint!r}?)" if hint else ""


def core_or_none(value: Any) -> Any:
    """``none`` / ``off`` / ``false`` (any case) mean no core: the feed-forward model."""
    if value is False or (isinstance(value, str) and value.strip().lower() in ("none", "off")):
        return None
    return value
