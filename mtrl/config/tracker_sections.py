"""Plugin trackers' settings sections: ``tracking.<tracker name>:`` checked with the tracker's
own pydantic model.

A tracker plugin registers its settings model with its tracker (``register.tracker(...,
settings=Model)``). This layer never imports the plugins: whoever loads a config hands the
models in as the validation context key ``tracker_settings`` (tracker name -> model, or None
for a tracker without settings; ``Plugins.config_context()`` gives it). With it, each extra key
of ``tracking`` must name a tracker with settings and is validated with its model, every
problem located at ``tracking.<name>.<key>`` so the loader gives it a file and line. Without it
(a config read by code that loaded no plugins, e.g. ``mtrl eval``, which runs no trackers),
sections are kept as plain mappings and only a key that is no mapping is refused.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

__all__ = ["SECTION_ERRORS", "check_sections", "section_schemas"]

#: The error kinds raised here whose message is final (the loader prints them as they are).
SECTION_ERRORS = ("unknown_tracker_section", "unknown_setting")

SettingsModels = Mapping[str, "type[BaseModel] | None"]

_FORBID = (
    {"extra": "forbid"} if "extra" in inspect.signature(BaseModel.model_validate).parameters else {}
)
"""Unknown keys of a section are refused whatever its model's own ``extra`` says (pydantic
2.11 and later can be told so at validation; older ones follow the model)."""


def check_sections(
    sections: Mapping[str, Any], fields: Iterable[str], models: SettingsModels | None
) -> dict[str, Any]:
    """``sections`` (the keys of ``tracking`` that are none of its ``fields``) with each one a
    tracker's model has validated into an instance of it; raises one
    :class:`pydantic.ValidationError` listing every problem, each at its key's location."""
    fields = list(fields)
    out: dict[str, Any] = {}
    errors: list[InitErrorDetails] = []
    for name, value in sections.items():
        model = models.get(name) if models is not None else None
        if model is not None and value is None:  # `mlflow:` with nothing under it: defaults
            value = {}
        if model is None:
            problem = _unknown(name, value, fields, models)
            if problem:
                errors.append(_error("unknown_tracker_section", problem, (name,), value))
            else:
                out[name] = value
            continue
        try:
            out[name] = model.model_validate(value, **_FORBID)
        except ValidationError as e:
            errors += [_located(name, model, err) for err in e.errors(include_url=False)]
    if errors:
        raise ValidationError.from_exception_data("tracking", errors)
    return out


def section_schemas(
    models: SettingsModels,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """``(sections, defs)`` for ``mtrl schema``: tracker name -> JSON Schema of its section,
    for every tracker with a settings model, and the definitions they refer to, named
    ``<Tracker>__<Model>`` so that no two plugins' (or mtrl's own) models clash."""
    sections: dict[str, dict[str, Any]] = {}
    defs: dict[str, dict[str, Any]] = {}
    for name, model in models.items():
        if model is None:
            continue
        prefix = f"{name}__"
        schema = model.model_json_schema(ref_template=f"#/$defs/{prefix}{{model}}")
        for key, value in schema.pop("$defs", {}).items():
            defs[prefix + key] = value
        sections[name] = schema
    return sections, defs


def _unknown(name: str, value: Any, fields: list[str], models: SettingsModels | None) -> str:
    """Why ``tracking.<name>`` is refused ("" when it is taken on trust: no models given and
    the value is a mapping, or empty, as a plugin tracker's section is)."""
    if not isinstance(value, dict | None):  # a stray scalar or list: no tracker's section
        return f"unknown key {name!r}{_did_you_mean(name, fields)}"
    if models is None:
        return ""
    with_settings = [n for n, m in models.items() if m is not None]
    if name in models:
        return (
            f"tracker {name!r} takes no settings, so `tracking.{name}:` has nothing to set; "
            f"trackers with settings: {', '.join(with_settings) or 'none installed'}"
        )
    installed = ", ".join(with_settings) or "none installed"
    return (
        f"unknown key {name!r}{_did_you_mean(name, fields + with_settings)} "
        f"(a tracker's section needs its plugin installed; trackers with settings: {installed})"
    )


def _did_you_mean(name: str, options: list[str]) -> str:
    hint = difflib.get_close_matches(name, options, n=1)
    return f"; did you mean {hint[0]!r}?" if hint else ""


def _located(section: str, model: type[BaseModel], err: Any) -> InitErrorDetails:
    """A problem of a tracker's section, moved under ``section`` and kept in its own kind (so
    the loader adds its usual hints); an unknown key gets a did-you-mean from ``model``."""
    loc = (section, *err["loc"])
    if err["type"] == "extra_forbidden":
        key = str(err["loc"][-1])
        owner = _model_at(model, err["loc"][:-1]) or model
        keys = list(owner.model_fields)
        hint = _did_you_mean(key, keys) or f"; allowed keys: {', '.join(keys)}"
        return _error("unknown_setting", f"unknown key {key!r}{hint}", loc, err.get("input"))
    ctx = {k: v for k, v in (err.get("ctx") or {}).items() if k != "error"}
    ctx["message"] = err["msg"]
    return InitErrorDetails(
        type=PydanticCustomError(err["type"], "{message}", ctx), loc=loc, input=err.get("input")
    )


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The nested model of ``model`` along ``loc`` (list indexes skipped), or None."""
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        ann = field.annotation
        found = [a for a in (ann, *getattr(ann, "__args__", ())) if _is_model(a)]
        if not found:
            return None
        model = found[0]
    return model


def _is_model(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseModel)


def _error(kind: str, message: str, loc: tuple[Any, ...], value: Any) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError(kind, "{message}", {"message": message}), loc=loc, input=value
    )
