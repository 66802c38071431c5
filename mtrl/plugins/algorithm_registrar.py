"""Learning rules offered by plugins: the registrar hooks receive and the registry of all.

What a learning rule is (the :class:`mtrl.learner.protocol.Learner` protocol) is defined in
:mod:`mtrl.learner`; the shared mechanics are :mod:`mtrl.plugins.named_registry`.

A rule is one unit (:class:`AlgorithmSpec`): besides its factory it may bring its settings as a
pydantic model (``settings=``: the config's ``learner.<name>:`` section is validated with it and
the factory gets the validated section as its seventh argument), its own config checks
(``checks=``), the memory of its replay (``replay_bytes=``, for the pre-flight estimate, with
``replay_capacity=``: its default size when the experiment's ``replay.capacity`` is null),
what it changes in a model to act (``prepare_model=``) and its own defaults for ``learner``
keys a config leaves out (``learner_defaults=``: the model's shape, the unroll). The registry
hands the models, checks and defaults to config validation
(:meth:`AlgorithmRegistry.settings_models`, :meth:`AlgorithmRegistry.config_checks`,
:meth:`AlgorithmRegistry.learner_defaults`), so the config layer never imports this one, and the
host asks the spec, never a rule's name, what the rule needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from mtrl.config import LearnerConfig
from mtrl.errors import UnknownNameError
from mtrl.plugins.named_registry import NamedRegistrar, NamedRegistry

#: The ways a learner can be spread over torchrun replicas (``learner.parallel``): plain data
#: parallel (``data_parallel > 1``), the two model-parallel modes, and ``loose_sync``: replicas
#: that update alone between synchronisations (``sync: local_sgd | diloco | async``; the
#: learner then implements :class:`mtrl.sync.replica_state.Reconcilable`).
PARALLEL_MODES = ("data_parallel", "task_sharded", "fsdp", "loose_sync")

ReplayBytes = Callable[[Any, Any, Any, Any], int]
"""``replay_bytes(cfg, settings, obs_space, action_space) -> int``: bytes of one task's replay
(``cfg``: the :class:`mtrl.config.LearnerConfig`, whose ``cfg.replay`` is the experiment's
``replay:`` section; ``settings``: the rule's validated section, None without one)."""
ConfigCheck = Callable[[Any, Any], list[str]]
"""``checks(cfg, settings) -> problems``: one line per problem of the learner config for this
rule (empty: none); ``settings`` is None for a rule without a settings model."""


class UnknownAlgorithmError(UnknownNameError):
    """A learning-rule name that no loaded plugin registered."""


@dataclass(frozen=True)
class AlgorithmSpec:
    """One learning rule and what the host needs to know of it.

    ``factory(model, cfg, task_names, ctx, device, lr_scales) -> Learner``, or with
    ``settings`` ``factory(model, cfg, task_names, ctx, device, lr_scales, settings)`` (the
    validated ``learner.<name>:`` section; the model's defaults when the config has none).
    ``parallel``: the modes of :data:`PARALLEL_MODES` it supports. ``prepare_model``: what the
    rule changes in a freshly built model to act (SAC's squashed-Gaussian heads), so that
    ``mtrl eval`` rebuilds the model its checkpoints hold (None: the model as it is built).
    ``replay_bytes``: the size of one task's replay (None: the rule keeps none), scaled by
    the experiment's ``replay.capacity`` (which a memory refusal names), and
    ``replay_capacity``: the rule's own default of it, in env steps per task, when the config
    leaves it null. ``checks``: the rule's own config checks.
    ``learner_defaults``: the rule's own values for ``learner`` keys a config leaves out (a
    rule whose networks or unrolls want other settings than the actor-critic's defaults; a
    nested section such as ``model`` key by key), filled in when the config is validated, so
    every part of the run builds the same model.
    """

    name: str
    factory: Callable[..., Any]
    plugin: str
    description: str = ""
    parallel: frozenset[str] = frozenset()
    prepare_model: Callable[[Any], None] | None = None
    settings: type[BaseModel] | None = None
    replay_bytes: ReplayBytes | None = None
    replay_capacity: int | None = None
    checks: ConfigCheck | None = None
    learner_defaults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def has_replay(self) -> bool:
        """Whether the rule keeps a replay (what ``checkpoint.replay`` saves)."""
        return self.replay_bytes is not None

    def capacity(self, cfg: Any) -> int | None:
        """Env steps per task the rule's replay keeps for learner config ``cfg``: the
        experiment's ``replay.capacity``, or the rule's default when it is null (None: the
        rule keeps no replay)."""
        if self.replay_capacity is None:
            return None
        return int(cfg.replay.capacity_or(self.replay_capacity))

    def resolve_settings(self, cfg: Any) -> BaseModel | None:
        """The rule's settings from learner config ``cfg``: its validated section, the model's
        defaults when the config has none (None: a rule without settings); a section the
        config holds unvalidated is validated now (:meth:`mtrl.config.LearnerConfig.settings`:
        a bad key raises :class:`~mtrl.errors.ConfigError`)."""
        return None if self.settings is None else cfg.settings(self.name, self.settings)

    def problems(self, cfg: Any) -> list[str]:
        """What the rule's own checks find wrong with learner config ``cfg`` (empty: nothing,
        or no checks)."""
        if self.checks is None:
            return []
        return list(self.checks(cfg, self.resolve_settings(cfg)))


class AlgorithmRegistry(NamedRegistry[AlgorithmSpec]):
    """Learning-rule names of every loaded plugin (one flat namespace, first wins)."""

    noun = "learning rule"
    unknown_error = UnknownAlgorithmError

    def parallel_support(self) -> dict[str, list[str]]:
        """Name -> the parallel modes it supports (the config's validation context)."""
        return {spec.name: sorted(spec.parallel) for spec in self}

    def settings_models(self) -> dict[str, type[BaseModel] | None]:
        """Every rule's name -> its settings model (None: it takes none), in registration
        order: what config validation checks ``learner.<name>:`` sections against."""
        return {spec.name: spec.settings for spec in self}

    def config_checks(self) -> dict[str, ConfigCheck]:
        """Name -> its own config check, for the rules that have one (config validation runs
        the chosen rule's)."""
        return {spec.name: spec.checks for spec in self if spec.checks is not None}

    def learner_defaults(self) -> dict[str, dict[str, Any]]:
        """Name -> its own ``learner`` defaults, for the rules that bring some (config
        validation fills them into a config that chooses the rule and leaves them out)."""
        return {spec.name: dict(spec.learner_defaults) for spec in self if spec.learner_defaults}


class AlgorithmRegistrar(NamedRegistrar[AlgorithmSpec]):
    """Collects one plugin's learning rules; malformed registrations become ``problems``."""

    noun = "learning rule"
    what = "factory"
    arguments = ("model", "cfg", "task_names", "ctx", "device", "lr_scales")

    def make_spec(self, name: str, obj: Callable[..., Any], description: str) -> AlgorithmSpec:
        return AlgorithmSpec(name, obj, self.plugin, description)

    def algorithm(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        parallel: Iterable[str] = (),
        description: str = "",
        prepare_model: Callable[[Any], None] | None = None,
        settings: type[BaseModel] | None = None,
        replay_bytes: ReplayBytes | None = None,
        replay_capacity: int | None = None,
        checks: ConfigCheck | None = None,
        learner_defaults: Mapping[str, Any] | None = None,
    ) -> None:
        """Register one learning rule (see
        :func:`mtrl.plugins.hookspecs.mtrl_register_algorithms`)."""
        modes = frozenset(parallel) if not isinstance(parallel, str) else frozenset([parallel])
        problem = _problem(
            modes, prepare_model, settings, replay_bytes, replay_capacity, checks
        ) or _learner_defaults_problem(learner_defaults)
        if problem:
            self.problems.append(f"{self.noun} {name!r}: {problem}")
            return
        before = len(self.specs)
        arguments = (*self.arguments, "settings") if settings is not None else None
        self._register(name, factory, description, arguments)
        if len(self.specs) > before:
            self.specs[-1] = replace(
                self.specs[-1],
                parallel=modes,
                prepare_model=prepare_model,
                settings=settings,
                replay_bytes=replay_bytes,
                replay_capacity=replay_capacity,
                checks=checks,
                learner_defaults=dict(learner_defaults or {}),
            )

    __call__ = algorithm


def _problem(
    modes: frozenset[str],
    prepare_model: Any,
    settings: Any,
    replay_bytes: Any,
    replay_capacity: Any,
    checks: Any,
) -> str | None:
    """What is malformed in a registration's keyword arguments (None: nothing)."""
    unknown = sorted(modes - set(PARALLEL_MODES))
    if unknown:
        return f"unknown parallel mode(s) {unknown}; known: {', '.join(PARALLEL_MODES)}"
    is_model = isinstance(settings, type) and issubclass(settings, BaseModel)
    if settings is not None and not is_model:
        return f"settings must be a pydantic BaseModel subclass, got {settings!r}"
    for what, obj in (
        ("prepare_model", prepare_model),
        ("replay_bytes", replay_bytes),
        ("checks", checks),
    ):
        if obj is not None and not callable(obj):
            return f"{what} must be callable, got {type(obj).__name__}"
    if replay_bytes is not None:
        whole = isinstance(replay_capacity, int) and not isinstance(replay_capacity, bool)
        if not whole or replay_capacity < 1:
            return (
                "replay_capacity must be the rule's default replay.capacity, a whole number "
                f"of env steps per task above 0, got {replay_capacity!r}"
            )
    elif replay_capacity is not None:
        return "replay_capacity is given without replay_bytes"
    return None


def _learner_defaults_problem(defaults: Any) -> str | None:
    """What is wrong with a registration's ``learner_defaults`` (None: nothing): a mapping of
    ``learner`` keys (not ``algorithm``) to values that section accepts."""
    if defaults is None:
        return None
    if not isinstance(defaults, Mapping):
        kind = type(defaults).__name__
        return f"learner_defaults must be a mapping of learner keys, got {kind}"
    keys = [k for k in LearnerConfig.model_fields if k != "algorithm"]
    unknown = sorted(str(k) for k in defaults if k not in keys)
    if unknown:
        return (
            f"learner_defaults names no learner key: {', '.join(unknown)} (keys: {', '.join(keys)})"
        )
    try:
        LearnerConfig.model_validate(dict(defaults))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"learner_defaults: learner.{where}: {first['msg']}"
    return None
