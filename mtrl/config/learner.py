"""The learner's part of an experiment config: the IMPALA loss and optimiser, per-task PopArt,
the model (encoders, torso, recurrent core, heads) and data/model parallelism.

A learning rule's own settings are no field here: each rule registers its pydantic model with
the rule (``register.algorithm(..., settings=Model)``), and its ``learner.<rule>:`` section is
validated with that model through the validation context (:mod:`mtrl.config.plugin_sections`),
as are the rule's own config checks. So this layer knows no rule beyond the built-in names a
config may give when no plugin registry is at hand (:data:`BUILTIN_ALGORITHMS`).

Kept apart from :mod:`mtrl.config.models` (which imports it into ``ExperimentConfig``) so each
module holds one part of the config; like it, this one depends on pydantic alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mtrl.config.base import ConfigModel
from mtrl.config.choices import require_registered
from mtrl.config.core import CoreConfig, CoreShorthand, core_or_none
from mtrl.config.multitask import MultitaskConfig, TorsoMixtureConfig
from mtrl.config.plugin_sections import RULES, check_sections, resolve_section, rule_check_error
from mtrl.config.replay import ReplayConfig

M = TypeVar("M", bound=BaseModel)

RuleCheck = Callable[[Any, Any], list[str]]
"""A learning rule's own config check: ``check(learner_config, settings) -> problems``."""


class PopArtConfig(ConfigModel):
    """Per-task PopArt value normalisation (Hessel et al. 2019)."""

    enabled: bool = True
    """Normalise value targets per task; off means raw (reward-scaled) targets."""
    beta: float = Field(default=0.01, gt=0, le=1)
    """Step size of the exponential moving averages of the first and second moments. 0.01
    lets the statistics follow returns that grow 100x within a run of ~10^3 updates; the
    paper's 3e-4 suits runs of 10^5+ updates (with it, a short run's σ lags far behind:
    docs/BENCHMARKS.md, "PopArt across reward scales")."""
    init_from_first_batch: bool = True
    """Set a task's statistics from its first batch of targets (β = 1 once) and keep its
    untrained head's normalised outputs, instead of moving away from μ = 0, ν = 1 at step β:
    training is then invariant to the task's reward scale from the first update."""
    value_scale_shrink: float = Field(default=1e-3, ge=0, le=1)
    """Each task's value error is measured in a scale that rises with σ at once but falls by
    at most this fraction per update. When a task is solved its returns become nearly
    constant and σ collapses with their spread, while the value error that the moving shared
    torso leaves does not: measured in σ it grows as 1/σ and its gradient into the torso as
    1/σ², and the solved task's value noise can come to steer the shared network
    (docs/BENCHMARKS.md, "Learning that holds"). The advantages are measured in the same
    scale and the plain entropy bonus is multiplied by σ / scale, so a solved task's
    advantages — noise of a fixed size in reward units — do not grow as its σ collapses and
    move its policy at full strength (the floor's and ceiling's extra bonus is not scaled).
    1: plain PopArt (value error and advantages in units of σ)."""
    sigma_min: PositiveFloat = 1e-4
    """Lower clip of each task's scale σ."""
    sigma_max: PositiveFloat = 1e6
    """Upper clip of each task's scale σ."""

    @model_validator(mode="after")
    def _sigma_range(self) -> PopArtConfig:
        if self.sigma_min >= self.sigma_max:
            raise ValueError(
                f"sigma_min ({self.sigma_min}) must be below sigma_max ({self.sigma_max})"
            )
        return self


class ModelConfig(ConfigModel):
    """Sizes of the multi-task network: per-task encoders → shared torso → per-task heads."""

    encoder_dim: PositiveInt = 256
    """Width of every task encoder's output (the torso's input)."""
    encoder_layers: PositiveInt = 2
    """Hidden layers, each ``encoder_dim`` wide, of the MLP that encodes a flat vector
    observation (images, text and nested spaces have their own encoders). With ``torso`` it sets
    the depth a vector task's input goes through before its head."""
    torso: list[PositiveInt] = Field(default_factory=lambda: [256, 256])
    """Hidden layer widths of the shared torso."""
    activation: Literal["relu", "tanh", "gelu"] = "relu"
    """Nonlinearity of MLP layers."""
    squashed_entropy: bool = True
    """For bounded continuous actions (squashed into ``[low, high]`` with tanh), the entropy
    bonus is that of the action the env receives, which keeps the Gaussian's mean out of the
    flat ends of the squash (mtrl/learner/distributions.py says why); off: the raw Gaussian's."""
    log_std_step_scale: PositiveFloat = 10.0
    """How many times faster than the network's weights a Gaussian head's state-independent
    log-std moves under Adam/RMSprop (it is stored divided by this). At 1 it moves at most ~lr
    per update, too slow to narrow the policy in an IMPALA run (InvertedPendulum's training
    return stayed under its target in 10 of 10 quickstart runs); 10 lets it narrow within a
    run (docs/BENCHMARKS.md, "The log-std step")."""
    torso_block: Literal["mlp", "residual"] = "mlp"
    """How the shared torso is built: ``mlp``, a ``Linear → activation`` layer per ``torso``
    width; ``residual``, BRO's BroNet (Nauman et al. 2024, "Bigger, Regularized, Optimistic"):
    a ``Linear → LayerNorm → activation`` stem, then one residual block
    ``x + LN(Linear(act(LN(Linear(x)))))`` per ``torso`` width, all widths equal
    (mtrl/learner/residual.py). Layer norm and the skip keep a wider, deeper torso trainable,
    which is where BRO's (and SimBa's, Lee et al. 2024) critics gain sample efficiency. Every
    network with a torso takes it (the policy's model, SAC's critics); not with
    ``torso_mixture``."""
    torso_mixture: TorsoMixtureConfig | None = None
    """A task-conditioned torso: expert MLPs of the ``torso`` widths, mixed per task through a
    learned task embedding (``{kind: moe | moore | soft_modular, experts: 4,
    task_embedding: 32}``, mtrl/config/multitask.py); none (the default): one MLP shared whole.
    Every network with a torso takes it (the policy's model, SAC's critics)."""
    core: Annotated[
        CoreConfig | None,
        BeforeValidator(core_or_none, json_schema_input_type=CoreConfig | CoreShorthand | None),
    ] = None
    """A recurrent core after the torso, for tasks that need memory: ``lstm`` or ``gru``, or
    ``{kind, hidden, shared}`` (mtrl/config/core.py); ``none`` (the default): feed-forward.
    Unrolls then carry each env copy's state at their start, and the learner runs the core
    over each unroll from it, resetting it where an episode starts."""

    @model_validator(mode="after")
    def _residual_torso_fits(self) -> ModelConfig:
        """Refuse a residual torso its ``torso`` widths cannot build (each block adds its input
        to its output, so every block has one width) or that would need task conditioning."""
        if self.torso_block != "residual":
            return self
        if not self.torso or len(set(self.torso)) > 1:
            w = self.torso[0] if self.torso else 256
            raise ValueError(
                "learner.model.torso: torso_block: residual adds each block's input to its "
                f"output, so the torso needs one or more equal widths, got {self.torso} (e.g. "
                f"[{w}, {w}])"
            )
        if self.torso_mixture is not None:
            raise ValueError(
                "learner.model.torso: torso_block: residual and torso_mixture do not compose "
                "yet (a residual torso is one network every task shares); drop one of them"
            )
        return self

    @model_validator(mode="after")
    def _torso_mixture_fits(self) -> ModelConfig:
        """Refuse a task-conditioned torso its ``torso`` widths cannot build, here rather than
        when the learner is built at train start (which reads as a problem of the envs)."""
        mix = self.torso_mixture
        if mix is None:
            return self
        if mix.kind == "soft_modular" and len(self.torso) < 2:
            raise ValueError(
                "learner.model.torso_mixture: soft_modular routes between torso layers, so "
                f"learner.model.torso needs at least two widths, got {self.torso} (e.g. "
                f"[{self.torso[0]}, {self.torso[0]}]), or use kind: moe or moore"
            )
        if mix.kind == "moore" and mix.experts > self.torso[-1]:
            raise ValueError(
                f"learner.model.torso_mixture: moore makes its {mix.experts} experts' outputs "
                f"orthonormal, which needs at least as many dimensions: learner.model.torso's "
                f"last width is {self.torso[-1]}; use experts <= {self.torso[-1]} or a wider "
                "last layer"
            )
        return self


class ParallelConfig(ConfigModel):
    """Distribution of the learner across devices/processes (torchrun)."""

    data_parallel: PositiveInt = 1
    """Learner replicas (processes) per node, each fed by its own actors; >1 all-reduces
    gradients, PopArt statistics and metrics (docs/DISTRIBUTED.md). Under torchrun the launcher
    decides: this must then be 1 or equal its ``--nproc-per-node``."""
    model_parallel: Literal["none", "task_sharded", "fsdp"] = "none"
    """With several replicas: ``task_sharded`` gives each rank the encoders and heads of its own
    tasks (it takes only their batches); ``fsdp`` shards the shared torso across ranks
    (``fully_shard``). On one process both are the plain learner."""
    sync: Literal["allreduce", "local_sgd", "diloco", "async"] = "allreduce"
    """How data-parallel replicas agree (docs/DISTRIBUTED.md, "Loosened synchronisation").
    ``allreduce``: every update all-reduces the gradients, so the replicas take one learner's
    step together. ``local_sgd``: each replica updates on its own batches and every
    ``sync_every`` updates the replicas average their parameters. ``diloco`` (Douillard et al.
    2023): every ``sync_every`` updates an outer Nesterov step on the replicas' mean parameter
    change (``outer_learning_rate``, ``outer_momentum``); each keeps its own optimiser state.
    ``async``: every ``sync_every`` updates a replica sends its parameters to one peer in turn
    and mixes in whatever its peers sent, with no barrier: a slow replica never holds up the
    others. PopArt statistics and entropy multipliers are averaged with the parameters, the
    value heads in their unnormalised form. Only with ``model_parallel: none``."""
    sync_every: PositiveInt = 50
    """Updates between two synchronisations (H) of ``local_sgd``, ``diloco`` and ``async``."""
    outer_learning_rate: PositiveFloat = 0.5
    """``diloco``'s outer step size (1.0 with ``outer_momentum: 0`` is plain parameter
    averaging). With momentum ``m`` a change that keeps its direction is stepped
    ``outer_learning_rate / (1 - m)`` times over: the default 0.5 and 0.5 step it once, as
    averaging would, and smooth it across syncs. The paper's 0.7 and 0.9 (language-model
    pretraining, H = 500) step it 7 times over, which lost tasks on every seed measured here
    (docs/BENCHMARKS.md, "Learner replicas over a slow link")."""
    outer_momentum: float = Field(default=0.5, ge=0, lt=1)
    """``diloco``'s outer Nesterov momentum (the paper's is 0.9; see ``outer_learning_rate``)."""

    @model_validator(mode="after")
    def _loose_sync_needs_whole_replicas(self) -> ParallelConfig:
        if self.sync != "allreduce" and self.model_parallel != "none":
            raise ValueError(
                f"learner.parallel.sync: {self.sync} averages whole replicas, but "
                f"model_parallel: {self.model_parallel} splits the model over ranks: use "
                "model_parallel: none, or sync: allreduce"
            )
        return self


_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?|xla(:\d+)?|mps)$")


#: What a config may name without the plugin registry: the built-in rules and the parallel
#: modes each supports (what mtrl.algorithms.builtin registers; a test holds them equal). With
#: the registry (context key ``algorithms``) this is not read.
_ALL_PARALLEL = {"data_parallel", "task_sharded", "fsdp", "loose_sync"}
BUILTIN_ALGORITHMS = {
    "impala": _ALL_PARALLEL,
    "impala_replay": _ALL_PARALLEL,
    "sac": {"data_parallel"},
}


class LearnerConfig(ConfigModel):
    """The learner: its learning rule (IMPALA with V-trace and per-task PopArt by default),
    the model and how it is spread over devices. A rule's own settings go in a section named
    after the rule (``learner.sac:``), checked with the rule's own model (``mtrl plugins``
    lists the installed rules; ``mtrl schema`` gives their sections). The defaults below are
    the actor-critic's; a rule may bring its own for the keys a config leaves out (SAC's:
    docs/ALGORITHMS.md), and the run directory's ``config.yaml`` holds the values used."""

    # Extra keys are learning rules' sections, each checked by ``_rule_sections``.
    model_config = ConfigDict(
        extra="allow", json_schema_extra={"additionalProperties": {"type": "object"}}
    )

    algorithm: str = "impala"
    """The learning rule, by the name a plugin registered it under (``mtrl plugins`` lists
    them): ``impala`` (built in) is actor-critic with V-trace off-policy correction and
    per-task PopArt."""
    unroll_length: PositiveInt = 20
    """Time steps per unroll."""
    batch_size: PositiveInt = 32
    """Env columns per learner update (mixed across tasks): an update waits until the unrolls
    it has hold at least this many env copies (an unroll of a 16-copy actor brings 16), so it
    trains on at least ``batch_size * unroll_length`` samples."""
    learning_rate: PositiveFloat = 6e-4
    """Optimiser step size (at the start of the run, see ``lr_schedule``)."""
    lr_schedule: Literal["constant", "linear"] = "linear"
    """``linear`` (IMPALA's rule): the step size falls linearly with the run's env steps, from
    ``learning_rate`` to ``learning_rate * lr_final_fraction`` at ``total_env_steps``;
    ``constant``: ``learning_rate`` throughout. Adam takes steps of about ``learning_rate``
    on every parameter whatever the size of its gradient, so once a task is solved its
    advantages, mostly noise by then, still move its policy by full steps: a constant rate lets
    solved tasks drift away and back (docs/BENCHMARKS.md, "Learning that holds")."""
    lr_final_fraction: float = Field(default=0.0, ge=0, le=1)
    """With ``lr_schedule: linear``, the step size at the end of the run over the initial one."""
    optimizer: Literal["adam", "rmsprop", "sgd"] = "adam"
    """Optimiser: Adam, RMSProp (IMPALA's) or plain SGD (no momentum; a linear step, so that
    averaging replicas after one step equals averaging their gradients)."""
    gamma: float = Field(default=0.99, gt=0, le=1)
    """Discount factor."""
    rho_bar: PositiveFloat = 1.0
    """V-trace clip of importance weights in the value target (ρ̄)."""
    c_bar: PositiveFloat = 1.0
    """V-trace clip of trace-cutting coefficients (c̄)."""
    lam: float = Field(default=1.0, ge=0, le=1)
    """V-trace λ mixing of multi-step targets."""
    entropy_coef: float = Field(default=0.01, ge=0)
    """Weight of a discrete policy's entropy bonus, and the unit of the extra bonus the
    entropy floor and saturation ceiling add (to any policy)."""
    gaussian_entropy_coef: float = Field(default=0.0, ge=0)
    """Weight of a Gaussian policy's plain entropy bonus. 0 by default, as in PPO's MuJoCo
    settings (Stable-Baselines3, CleanRL): a squashed Gaussian's entropy falls as its mean
    leaves the middle of the action range, so the bonus pulls every state's action toward
    the middle whatever the returns. Measured on InvertedPendulum (docs/BENCHMARKS.md): with
    it the exploring policy ended at 855–942 in 6 of 30 runs while the greedy one scored
    1000; without it the policy pushes to the bounds in the states that need full force (its
    mean past the squash's knee on ~8 % of states instead of ~2 %, its log-std no lower),
    where the noise is squashed away. What keeps the mean from drifting out where tanh is
    flat on too many states is then the saturation ceiling alone (``saturation_ceiling``)."""
    entropy_floor: float = Field(default=0.2, ge=0, lt=1)
    """A floor under each discrete task's policy entropy, as a fraction of its uniform
    policy's (log of the action count): while the entropy is below, the task's entropy bonus
    grows (up to 100x), and it decays back once above. It keeps a policy that turned
    deterministic early at a poor behaviour from staying there
    (mtrl/algorithms/impala/entropy_floor.py says why). Gaussian policies are not affected; 0
    turns it off."""
    saturation_ceiling: float = Field(default=0.1, gt=0, le=1)
    """A ceiling on the fraction of a bounded continuous task's action dims whose Gaussian mean
    lies where the tanh squash is flat (``|mean| > 2``): while above it, an extra entropy
    bonus — the squashed action's, whose gradient pulls the mean back where actions differ —
    of ``entropy_coef · (boost − 1)`` grows as under ``entropy_floor`` (boost up to 100) and
    decays back once below. A fast-moving
    policy can throw the mean out there, where every sample is the same env action and the
    policy gradient carries no signal (mtrl/algorithms/impala/entropy_floor.py says why). 0.1, not
    0.2, since a Gaussian's plain bonus is off (``gaussian_entropy_coef``): without its pull
    the fraction drifted to 0.15–0.18 in some InvertedPendulum runs, one of which then fell
    from 924 to 114; at 0.1 its mean over each run's last quarter stayed at or under 0.1 in
    60 runs of 60 (docs/BENCHMARKS.md). Needs ``model.squashed_entropy``; 1 turns it off."""
    value_coef: float = Field(default=0.5, ge=0)
    """Weight of the value loss."""
    max_grad_norm: PositiveFloat = 40.0
    """Global gradient-norm clip."""
    popart: PopArtConfig = Field(default_factory=PopArtConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The network's shape (a rule's own defaults may replace these, as the section says)."""
    device: str = "auto"
    """``auto`` (cuda when each learner replica of the node gets a GPU of its own, else cpu),
    ``cpu``, ``cuda[:N]``, ``xla[:N]`` or ``mps``.
    Under torchrun ``cuda`` means each replica's own GPU (its local rank). ``xla`` runs learner
    and inference through torch_xla (TPU; the ``tpu`` extra, torch_xla X.Y needs torch X.Y)."""
    parallel: ParallelConfig = Field(default_factory=ParallelConfig)
    multitask: MultitaskConfig = Field(default_factory=MultitaskConfig)
    """How the tasks' gradients on the shared torso combine (``sum``, ``pcgrad``, ``cagrad``)."""
    diagnostics_every: int = Field(default=10, ge=0)
    """Updates between measurements of each task's share of the shared torso's gradient
    (``learner/<task>/torso_grad_share``; one extra backward pass per task, single-process
    learners only); 0 turns the measurement off. The other per-task diagnostics are free."""
    torch_threads: PositiveInt = 1
    """Intra-op threads of torch in the learner process. One is fastest when actors and learner
    share few cores: small matmuls gain nothing from more, and OpenMP spin-waits collapse under
    contention (measured 60x slower inference with 2 threads on a loaded 2-core machine)."""

    @field_validator("algorithm")
    @classmethod
    def _algorithm_exists(cls, algorithm: str, info: ValidationInfo) -> str:
        # The plugin registry's rules come as context key ``algorithms``; without it only the
        # built-in is known, so typos are still caught.
        return require_registered(
            algorithm, _algorithms(info), "learning rule", "unknown_algorithm"
        )

    @model_validator(mode="after")
    def _algorithm_supports_parallel(self, info: ValidationInfo) -> LearnerConfig:
        """A rule runs only in the parallel modes its plugin says it supports."""
        supported = _algorithms(info).get(self.algorithm)
        par = self.parallel
        asked = [m for m in ("task_sharded", "fsdp") if par.model_parallel == m]
        if par.data_parallel > 1:
            asked.append("data_parallel")
        if par.sync != "allreduce":
            asked.append("loose_sync")
        missing = [m for m in asked if supported is not None and m not in supported]
        if missing:
            can = ", ".join(sorted(supported or ())) or "none"
            raise ValueError(
                f"learning rule {self.algorithm!r} does not support learner.parallel "
                f"{' and '.join(missing)} (it supports: {can}); run it on one learner "
                "process (data_parallel: 1, model_parallel: none) or choose another rule"
            )
        return self

    _checkpoint_replay: bool = PrivateAttr(default=False)
    """``checkpoint.replay``, set by :class:`~mtrl.config.models.ExperimentConfig` (a learner
    receives ``learner`` only)."""
    _replay: ReplayConfig | None = PrivateAttr(default=None)
    """The experiment's ``replay:`` section, set by
    :class:`~mtrl.config.models.ExperimentConfig` (None: a learner config built alone)."""

    @property
    def checkpoint_replay(self) -> bool:
        """Whether checkpoints keep a replay-based rule's replay (``checkpoint.replay``)."""
        return self._checkpoint_replay

    @model_validator(mode="before")
    @classmethod
    def _rule_learner_defaults(cls, data: Any, info: ValidationInfo) -> Any:
        """The chosen rule's own defaults for ``learner`` keys (context key
        ``algorithm_learner_defaults``: a rule's registration may bring them) under the keys the
        config leaves out, nested sections (``model``) key by key, so the resolved config, the
        learner and the actors' copies of the policy all agree; keys the config sets win."""
        own = (info.context or {}).get("algorithm_learner_defaults") or {}
        if not own or not isinstance(data, dict):
            return data
        rule = data.get("algorithm", cls.model_fields["algorithm"].default)
        defaults = own.get(rule) if isinstance(rule, str) else None
        return fill_defaults(data, defaults) if defaults else data

    @property
    def replay(self) -> ReplayConfig:
        """The experiment's ``replay:`` section (its defaults for a learner config built
        alone): what a replay-based rule's replay holds and how it is drawn from."""
        return self._replay if self._replay is not None else ReplayConfig()

    @model_validator(mode="after")
    def _rule_sections(self, info: ValidationInfo) -> LearnerConfig:
        """Each ``learner.<rule>:`` section validated with its rule's model (context key
        ``algorithm_settings``; without it sections stay plain mappings:
        mtrl/config/plugin_sections.py). The chosen rule's own checks need the experiment's
        ``replay:`` section too, so :class:`~mtrl.config.models.ExperimentConfig` runs them
        (:meth:`check_rule`)."""
        extra = self.__pydantic_extra__
        if extra:
            models = (info.context or {}).get("algorithm_settings")
            extra.update(check_sections(extra, type(self).model_fields, models, RULES))
        return self

    def check_rule(self, context: Mapping[str, Any] | None, loc: tuple[Any, ...]) -> None:
        """Run the chosen rule's own config check (context keys ``algorithm_checks`` and
        ``algorithm_settings``; none without them), raising one
        :class:`pydantic.ValidationError` with a problem per line, each at ``loc`` (this
        config's ``algorithm``, from the caller's model)."""
        context = context or {}
        check: RuleCheck | None = (context.get("algorithm_checks") or {}).get(self.algorithm)
        if check is None:
            return
        model = (context.get("algorithm_settings") or {}).get(self.algorithm)
        settings = self.settings(self.algorithm, model) if model is not None else None
        problems = check(self, settings)
        if problems:
            raise ValidationError.from_exception_data(
                "learner", [rule_check_error(p, loc) for p in problems]
            )

    def section(self, rule: str) -> Any:
        """Rule ``rule``'s settings section (``learner.<rule>:``) as the config holds it: an
        instance of the rule's model when the config was validated with the installed rules'
        models, the plain mapping otherwise; None when the config has none."""
        return (self.__pydantic_extra__ or {}).get(rule)

    def settings(self, rule: str, model: type[M]) -> M:
        """Rule ``rule``'s settings as an instance of its ``model``: the validated section, the
        model's defaults when the config has none, or (a config validated without the rules'
        models) its plain mapping validated now, a bad key raising
        :class:`~mtrl.errors.ConfigError`."""
        return resolve_section(self.section(rule), rule, model, RULES)

    def with_settings(self, rule: str, settings: BaseModel) -> LearnerConfig:
        """A copy whose ``learner.<rule>`` section is ``settings`` (an instance of the rule's
        model), so the rule reads ``cfg.<rule>`` as validated settings whoever parsed the
        config; this config is left as it is."""
        out = self.model_copy()
        out.__pydantic_extra__ = {**(self.__pydantic_extra__ or {}), rule: settings}
        return out

    @model_validator(mode="after")
    def _gradient_combination_fits(self) -> LearnerConfig:
        """Combining per-task gradients needs a whole torso on every replica."""
        how = self.multitask.gradients
        if how == "sum":
            return self
        if self.parallel.model_parallel == "fsdp":
            raise ValueError(
                f"learner.multitask.gradients: {how} needs each task's gradient of the whole "
                "torso, which model_parallel: fsdp splits over ranks: use model_parallel: none "
                "or task_sharded, or gradients: sum"
            )
        return self

    @field_validator("device")
    @classmethod
    def _device(cls, device: str) -> str:
        if not _DEVICE.match(device):
            raise ValueError(f"unknown device {device!r}; use auto, cpu, cuda[:N], xla[:N] or mps")
        return device


def _algorithms(info: ValidationInfo) -> Mapping[str, set[str]]:
    """Learning rule -> the parallel modes it supports, from the validation context (the
    plugin registry) or the built-ins."""
    known = (info.context or {}).get("algorithms")
    return BUILTIN_ALGORITHMS if known is None else known


def fill_defaults(given: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` with ``defaults`` under the keys it lacks; where both hold a mapping, the same
    one level down (a key ``given`` sets always wins, and its value is kept as it is)."""
    out = dict(given)
    for key, value in defaults.items():
        if key not in out:
            out[key] = value
        elif isinstance(out[key], Mapping) and isinstance(value, Mapping):
            out[key] = fill_defaults(out[key], value)
    return out
