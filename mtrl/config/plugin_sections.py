"""Plugins' settings sections: ``tracking.<tracker>:`` and ``learner.<rule>:``, each checked
with the pydantic model its plugin registered.

A tracker plugin registers its settings model with its tracker (``register.tracker(...,
settings=Model)``), a learning rule with its rule (``register.algorithm(..., settings=Model)``;
the built-in rules too). This layer never imports the plugins: whoever loads a config hands the
models in as a validation context key (name -> model, or None for one without settings;
``Plugins.config_context()`` gives them): ``tracker_settings`` for ``tracking`` (:data:`TRACKERS`)
and ``algorithm_settings`` for ``learner`` (:data:`RULES`). With it, each extra key of the
section must name a plugin offering with settings and is validated with its model, every problem
located at ``<section>.<name>.<key>`` so the loader gives it a file and line. Without it (a
config read by code that loaded no plugins, e.g. ``mtrl eval``, which runs no trackers, or a
config built in code), sections are kept as plain mappings and only a key that is no mapping is
refused; :func:`resolve_section` validates such a mapping when its owner is built.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from mtrl.config.base import moved_key
from mtrl.errors import ConfigError

__all__ = [
    "MOVED_KEY",
    "RULES",
    "SECTION_ERRORS",
    "TRACKERS",
    "SectionKind",
    "check_sections",
    "resolve_section",
    "rule_check_error",
    "section_schemas",
]

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class SectionKind:
    """Which plugin offerings own the extra keys of a config section, in the words of its
    messages."""

    parent: str
    """The config section that holds them (``tracking``)."""
    noun: str
    """One offering (``tracker``)."""
    plural: str
    """Several (``trackers``)."""
    error: str
    """The error kind of a key that names none of them."""


TRACKERS = SectionKind("tracking", "tracker", "trackers", "unknown_tracker_section")
"""``tracking.<tracker>:``, models from context key ``tracker_settings``."""
RULES = SectionKind("learner", "learning rule", "learning rules", "unknown_rule_section")
"""``learner.<rule>:``, models from context key ``algorithm_settings``."""

RULE_CHECK = "rule_check"
"""The error kind of a problem a learning rule's own config check found."""
MOVED_KEY = "moved_key"
"""The error kind of a key its model says moved elsewhere (``moved_keys``)."""

#: The error kinds raised here whose message is final (the loader prints them as they are).
SECTION_ERRORS = (TRACKERS.error, RULES.error, "unknown_setting", RULE_CHECK, MOVED_KEY)

SettingsModels = Mapping[str, "type[BaseModel] | None"]

_FORBID = (
    {"extra": "forbid"} if "extra" in inspect.signature(BaseModel.model_validate).parameters else {}
)
"""Unknown keys of a section are refused whatever its model's own ``extra`` says (pydantic
2.11 and later can be told so at validation; older ones follow the model)."""


def check_sections(
    sections: Mapping[str, Any],
    fields: Iterable[str],
    models: SettingsModels | None,
    kind: SectionKind = TRACKERS,
) -> dict[str, Any]:
    """``sections`` (the keys of ``kind.parent`` that are none of its ``fields``) with each one
    a model has validated into an instance of it; raises one :class:`pydantic.ValidationError`
    listing every problem, each at its key's location."""
    fields = list(fields)
    out: dict[str, Any] = {}
    errors: list[InitErrorDetails] = []
    for name, value in sections.items():
        model = models.get(name) if models is not None else None
        if model is not None and value is None:  # `mlflow:` with nothing under it: defaults
            value = {}
        if model is None:
            problem = _unknown(name, value, fields, models, kind)
            if problem:
                errors.append(_error(kind.error, problem, (name,), value))
            else:
                out[name] = value
            continue
        try:
            out[name] = model.model_validate(value, **_FORBID)
        except ValidationError as e:
            errors += [_located(name, model, err) for err in e.errors(include_url=False)]
    if errors:
        raise ValidationError.from_exception_data(kind.parent, errors)
    return out


def resolve_section(value: Any, name: str, model: type[M], kind: SectionKind) -> M:
    """Section ``name``'s settings as an instance of ``model``: ``value`` itself when the config
    was validated with the models, the model's defaults when the config has none, else the
    plain mapping validated now. A bad key or value raises :class:`~mtrl.errors.ConfigError`,
    one line per problem (``learner.sac.batch_size: ...``; no file: the config was not read
    with the models)."""
    if isinstance(value, model):
        return value
    try:
        return check_sections({name: value}, (), {name: model}, kind)[name]  # type: ignore[no-any-return]
    except ValidationError as e:
        lines = [
            f"{'.'.join(map(str, (kind.parent, *err['loc'])))}: {err['msg']}"
            for err in e.errors(include_url=False)
        ]
        raise ConfigError("\n".join(lines), problems=lines) from None


def rule_check_error(problem: str, loc: tuple[Any, ...]) -> InitErrorDetails:
    """One problem a learning rule's own check found (``checks(cfg, settings)`` of its
    registration), located at ``loc`` in the learner's section."""
    return _error(RULE_CHECK, problem, loc, None)


def section_schemas(
    models: SettingsModels,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """``(sections, defs)`` for ``mtrl schema``: name -> JSON Schema of its section, for every
    offering with a settings model, and the definitions they refer to, named
    ``<name>__<Model>`` so that no two plugins' (or mtrl's own) models clash."""
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


def _unknown(
    name: str, value: Any, fields: list[str], models: SettingsModels | None, kind: SectionKind
) -> str:
    """Why ``<parent>.<name>`` is refused ("" when it is taken on trust: no models given and
    the value is a mapping, a settings instance (a config built in code) or empty, as a
    plugin's section is)."""
    if not isinstance(value, dict | BaseModel | None):  # a stray scalar or list
        return f"unknown key {name!r}{_did_you_mean(name, fields)}"
    if models is None:
        return ""
    with_settings = [n for n, m in models.items() if m is not None]
    installed = ", ".join(with_settings) or "none installed"
    if name in models:
        return (
            f"{kind.noun} {name!r} takes no settings, so `{kind.parent}.{name}:` has nothing "
            f"to set; {kind.plural} with settings: {installed}"
        )
    return (
        f"unknown key {name!r}{_did_you_mean(name, fields + with_settings)} "
        f"(a {kind.noun}'s section needs its plugin installed; {kind.plural} with settings: "
        f"{installed})"
    )


def _did_you_mean(name: str, options: list[str]) -> str:
    hint = difflib.get_close_matches(name, options, n=1)
    return f"; did you mean {hint[0]!r}?" if hint else ""


def _located(section: str, model: type[BaseModel], err: Any) -> InitErrorDetails:
    """A problem of a plugin's section, moved under ``section`` and kept in its own kind (so
    the loader adds its usual hints); an unknown key gets where it went when ``model`` says it
    moved (``moved_keys``), else a did-you-mean from ``model``."""
    loc = (section, *err["loc"])
    if err["type"] == "extra_forbidden":
        key = str(err["loc"][-1])
        owner = _model_at(model, err["loc"][:-1]) or model
        moved = moved_key(owner, key)
        if moved:
            return _error(MOVED_KEY, moved, loc, err.get("input"))
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
