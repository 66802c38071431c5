"""Loading experiment configs from YAML, with one error line per problem.

Errors name the file, the line and the YAML path (``tasks[2].env``), say what is wrong and,
where possible, how to fix it (did-you-mean for keys, env ids and values outside a field's
choices).
"""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from mtrl.config.base import moved_key
from mtrl.config.choices import choice_error_hint
from mtrl.config.learner import RuleCheck
from mtrl.config.models import ExperimentConfig
from mtrl.config.plugin_sections import SECTION_ERRORS, section_schemas
from mtrl.config.safe_yaml import compose_config, read_config_text
from mtrl.errors import ConfigError
from mtrl.names import own_venv_hints

Loc = tuple[str | int, ...]
EnvNote = Callable[[str], str | None]
"""Extra words for an unknown env id (e.g. ``Plugins.unknown_env_note``: a plugin that failed
to load may have offered it), or None."""

RESERVED_ENV_KWARGS = {
    "num_envs": "how many env copies each actor steps",
    "seed": "the seed of the task's envs",
}
"""Arguments every env factory already gets from the task's own fields, so they cannot be
``env_kwargs`` too."""

MAX_PROBLEMS = 50
"""Problems listed for one config; past it one line says how many more there are."""
MAX_LINE_CHARS = 400
"""Longest problem line; a longer one (a huge key or value quoted in it) is cut."""

_VALUE_REPR = reprlib.Repr()
_VALUE_REPR.maxstring = _VALUE_REPR.maxother = _VALUE_REPR.maxlong = 60
_VALUE_REPR.maxlevel, _VALUE_REPR.maxdict = 2, 4
_VALUE_REPR.maxlist = _VALUE_REPR.maxtuple = _VALUE_REPR.maxset = 4
"""Quotes a value in a message: short whatever the value (a long string, a large list)."""


def format_loc(loc: Loc) -> str:
    """``('tasks', 2, 'env')`` → ``tasks[2].env``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not (isinstance(part, str) and part.isprintable()):  # a key "a\nb" stays one line
            out += f"[{_VALUE_REPR.repr(part)}]"
        else:
            out += f".{part}" if out else part
    return out or "(top level)"


#: Error kinds about a key itself (not its value): their line is the key's.
_KEY_ERRORS = ("extra_forbidden", *SECTION_ERRORS)


def _line_of(root: yaml.Node | None, loc: Loc, *, key: bool = False) -> int | None:
    """1-based line of the deepest YAML node along ``loc`` that exists (``key``: of the last
    key itself when it exists, not of its value, which may start on the next line)."""
    node, line = root, None
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        child = None
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if k.value == part:
                    child = v
                    line = k.start_mark.line + 1
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(node.value)
        ):
            child = node.value[part]
        node = child
    if node is not None and not key:
        line = node.start_mark.line + 1
    return line


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The pydantic model class that owns the last key of ``loc`` (for key suggestions)."""
    model: Any = ExperimentConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if model else None
        if field is None:
            return None
        ann = field.annotation
        args = getattr(ann, "__args__", ())
        candidates = [ann, *args]
        model = next(
            (c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
    return model


def reserved_env_kwargs_problems(env_kwargs: Any) -> list[tuple[str, str]]:
    """``(key, problem)`` for each key of ``env_kwargs`` that is a task field instead
    (``num_envs``, ``seed``): the factory gets those from the task, and twice is an error."""
    if not isinstance(env_kwargs, dict):
        return []
    return [
        (
            key,
            f"{key} is the task's own field ({what}), not an env kwarg: "
            f"move `{key}: {env_kwargs[key]}` out of env_kwargs, next to `env:`",
        )
        for key, what in RESERVED_ENV_KWARGS.items()
        if key in env_kwargs
    ]


def _whole_number_hint(value: Any) -> str:
    """For an integer field given text such as ``1e6`` (YAML 1.1 reads a float without a dot
    and a signed exponent as a string): say how to write it."""
    try:
        number = float(str(value).replace("_", ""))
    except ValueError:
        return ""
    if not number.is_integer():
        return "; write a whole number"
    n = int(number)
    return f"; YAML reads {value!r} as text, not a number: write {n} or {n:_}"


def _message(err: dict[str, Any], env_note: EnvNote | None = None) -> str:
    kind, loc = err["type"], tuple(err["loc"])
    if kind == "extra_forbidden":
        key = str(loc[-1])
        model = _model_at(loc)
        if moved := moved_key(model, key):
            return moved
        hint = difflib.get_close_matches(key, list(model.model_fields), n=1) if model else []
        fix = (
            f"; did you mean {hint[0]!r}?"
            if hint
            else (f"; allowed keys: {', '.join(model.model_fields)}" if model else "")
        )
        return f"unknown key {key!r}{fix}"
    if kind == "missing":
        return "required key is missing"
    if kind == "too_short" and loc == ("tasks",):
        return "at least one task is required"
    if kind == "unknown_env":
        note = env_note(str(err.get("input"))) if env_note else None
        return err["msg"] + (f"; {note}" if note else "")
    known_kinds = ("unknown_policy", "unknown_tracker", "duplicate_task", *SECTION_ERRORS)
    if kind in known_kinds or kind == "value_error":
        return err["msg"].removeprefix("Value error, ")
    msg = err["msg"]
    if "input" in err and kind not in ("model_type", "dict_type"):
        msg += f" (got {_VALUE_REPR.repr(err['input'])})"
        if kind == "int_parsing" and isinstance(err["input"], str):
            msg += _whole_number_hint(err["input"])
        msg += choice_error_hint(err)
    elif kind in ("model_type", "dict_type"):
        msg = f"must be a mapping of keys, got {type(err.get('input')).__name__}"
    return msg


def _problems(
    err: ValidationError | None,
    data: dict[str, Any],
    root: yaml.Node | None,
    source: str,
    env_note: EnvNote | None = None,
) -> list[str]:
    """One ``file:line: path: message`` per validation error and per reserved env kwarg (the
    first :data:`MAX_PROBLEMS`, each cut to :data:`MAX_LINE_CHARS`)."""
    found: list[tuple[Loc, str, bool]] = []
    for e in err.errors(include_url=False) if err is not None else ():
        loc = tuple(e["loc"])
        if e["type"] == "duplicate_task":
            loc = ("tasks", int(e["ctx"]["i"]), "name")
        found.append((loc, _message(e, env_note), e["type"] in _KEY_ERRORS))
    tasks = data.get("tasks")
    for i, task in enumerate(tasks if isinstance(tasks, list) else []):
        if isinstance(task, dict):
            for key, problem in reserved_env_kwargs_problems(task.get("env_kwargs")):
                found.append((("tasks", i, "env_kwargs", key), problem, True))
    lines: list[tuple[int, str]] = []
    for loc, message, of_key in found[:MAX_PROBLEMS]:
        line = _line_of(root, loc, key=of_key)
        where = f"{source}:{line}" if line else source
        lines.append((line or 0, _fit(f"{where}: {format_loc(loc)}: {message}")))
    out = [text for _, text in sorted(lines, key=lambda x: x[0])]
    if len(found) > MAX_PROBLEMS:
        out.append(f"{source}: … and {len(found) - MAX_PROBLEMS:,} more problems")
    errors = err.errors(include_url=False) if err is not None else []
    unknown = [e.get("input") for e in errors if e["type"] == "unknown_env"]
    out += [f"{source}: note: {hint}" for hint in own_venv_hints(unknown)]
    return out


def _fit(text: str) -> str:
    """``text`` on one line of at most :data:`MAX_LINE_CHARS` characters."""
    text = " ".join(text.splitlines())
    if len(text) > MAX_LINE_CHARS:
        text = text[: MAX_LINE_CHARS - 30] + f"… ({len(text):,} characters in all)"
    return text


def parse_config(
    text: str,
    source: str = "<config>",
    *,
    env_ids: Iterable[str] | None = None,
    scheduler_policies: Iterable[str] | None = None,
    tracker_names: Iterable[str] | None = None,
    tracker_settings: Mapping[str, type[BaseModel] | None] | None = None,
    algorithms: Mapping[str, Iterable[str]] | None = None,
    algorithm_settings: Mapping[str, type[BaseModel] | None] | None = None,
    algorithm_checks: Mapping[str, RuleCheck] | None = None,
    algorithm_learner_defaults: Mapping[str, Mapping[str, Any]] | None = None,
    env_note: EnvNote | None = None,
) -> ExperimentConfig:
    """Validate YAML ``text``; ``env_ids`` (the plugin registry's ids) enables id checks.

    ``env_note`` (``plugins.unknown_env_note``) adds to an unknown id's error why it may be
    missing (a plugin that failed to load).

    ``scheduler_policies`` (``plugins.schedulers.names()``) are the policy names accepted in
    ``scheduler.policy``; without it only the built-in policies are. ``tracker_names``
    (``plugins.trackers.names()``) are those accepted in ``tracking.trackers``; without it any
    name is. ``tracker_settings`` (``plugins.trackers.settings_models()``) maps every installed
    tracker to its settings model (or None): each ``tracking.<tracker>:`` section is validated
    with it, and a section of no installed tracker is refused; without it such sections are
    kept as plain mappings (mtrl/config/plugin_sections.py). ``algorithms``
    (``plugins.algorithms.parallel_support()``) maps the learning rules accepted in
    ``learner.algorithm`` to the parallel modes each supports; without it only the built-in rules
    (``impala``, ``impala_replay``, ``sac``) are. ``algorithm_settings``
    (``plugins.algorithms.settings_models()``) maps every installed rule to its settings model
    (or None), which validates its ``learner.<rule>:`` section as ``tracker_settings`` does a
    tracker's; ``algorithm_checks`` (``plugins.algorithms.config_checks()``) maps rules to their
    own config checks, run on the chosen rule; ``algorithm_learner_defaults``
    (``plugins.algorithms.learner_defaults()``) maps rules to their own defaults for ``learner``
    keys (``model`` among them), filled into a config that chooses the rule and leaves them out.
    ``Plugins.config_context()`` gives all of these.

    The text is held to the limits of :mod:`mtrl.config.safe_yaml` (size, nesting, aliases).
    """
    root, data = compose_config(text, source)
    if data is None:
        raise ConfigError(f"{source}: the config is empty; it needs at least a `tasks:` list")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the config must be a mapping of keys, got {type(data).__name__}"
        )
    context: dict[str, Any] = {}
    if env_ids is not None:
        context["env_ids"] = set(env_ids)
    if scheduler_policies is not None:
        context["scheduler_policies"] = set(scheduler_policies)
    if tracker_names is not None:
        context["tracker_names"] = set(tracker_names)
    if tracker_settings is not None:
        context["tracker_settings"] = dict(tracker_settings)
    if algorithms is not None:
        context["algorithms"] = {name: set(modes) for name, modes in algorithms.items()}
    if algorithm_settings is not None:
        context["algorithm_settings"] = dict(algorithm_settings)
    if algorithm_checks is not None:
        context["algorithm_checks"] = dict(algorithm_checks)
    if algorithm_learner_defaults is not None:
        context["algorithm_learner_defaults"] = dict(algorithm_learner_defaults)
    try:
        cfg, error = ExperimentConfig.model_validate(data, context=context or None), None
    except ValidationError as e:
        cfg, error = None, e
    problems = _problems(error, data, root, source, env_note)
    if problems or cfg is None:
        raise ConfigError("\n".join(problems), problems=problems) from None
    return cfg


def load_config(
    path: str | Path,
    *,
    env_ids: Iterable[str] | None = None,
    scheduler_policies: Iterable[str] | None = None,
    tracker_names: Iterable[str] | None = None,
    tracker_settings: Mapping[str, type[BaseModel] | None] | None = None,
    algorithms: Mapping[str, Iterable[str]] | None = None,
    algorithm_settings: Mapping[str, type[BaseModel] | None] | None = None,
    algorithm_checks: Mapping[str, RuleCheck] | None = None,
    algorithm_learner_defaults: Mapping[str, Mapping[str, Any]] | None = None,
    env_note: EnvNote | None = None,
) -> ExperimentConfig:
    """Read and validate the YAML config at ``path`` (see :func:`parse_config`)."""
    path = Path(path)
    return parse_config(
        read_config_text(path),
        str(path),
        env_ids=env_ids,
        scheduler_policies=scheduler_policies,
        tracker_names=tracker_names,
        tracker_settings=tracker_settings,
        algorithms=algorithms,
        algorithm_settings=algorithm_settings,
        algorithm_checks=algorithm_checks,
        algorithm_learner_defaults=algorithm_learner_defaults,
        env_note=env_note,
    )


def config_schema(
    tracker_settings: Mapping[str, type[BaseModel] | None] | None = None,
    algorithm_settings: Mapping[str, type[BaseModel] | None] | None = None,
) -> dict[str, Any]:
    """JSON Schema of the experiment config, for editors (e.g. YAML language servers).

    ``tracker_settings`` (``plugins.trackers.settings_models()``) adds the installed plugin
    trackers' sections to ``tracking``, ``algorithm_settings``
    (``plugins.algorithms.settings_models()``) the installed learning rules' to ``learner``."""
    schema = ExperimentConfig.model_json_schema()
    for parent, models in (
        ("TrackingConfig", tracker_settings),
        ("LearnerConfig", algorithm_settings),
    ):
        sections, defs = section_schemas(models or {})
        props = schema["$defs"][parent]["properties"]
        for name, section in sections.items():
            props.setdefault(name, section)
        schema["$defs"].update(defs)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "mtrl experiment config"
    return schema
