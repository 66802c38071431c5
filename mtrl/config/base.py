"""The base of every config model: unknown keys are errors, field docstrings are the schema's
descriptions (``mtrl validate`` and the JSON schema show them), and a key that moved elsewhere
is refused with where it went."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import BaseModel, ConfigDict


class ConfigModel(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    moved_keys: ClassVar[Mapping[str, str]] = {}
    """Keys this model once had -> where they are now (``"replay.capacity"``, words after it
    allowed): a config that still sets one is refused with ``moved to <where>`` at the key's
    line instead of as an unknown key. A plugin's settings model (any pydantic model) may
    declare it too."""


def moved_key(model: type[BaseModel] | None, key: str) -> str | None:
    """The one-line message for ``key`` when ``model`` says it moved (None: it did not)."""
    target = getattr(model, "moved_keys", {}).get(key) if model is not None else None
    return f"moved to {target}" if target else None
