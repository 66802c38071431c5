"""The base of every config model: unknown keys are errors, field docstrings are the schema's
descriptions (``mtrl validate`` and the JSON schema show them)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigModel(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
