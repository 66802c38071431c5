"""Pydantic models of an experiment: what a YAML config may say, with constraints and defaults.

Every field is documented by the docstring under it (exported to JSON Schema for editors).
Everything has a sensible default except the task list. Cross-field checks that need the plugin
registry (does an env id exist?) read it from the validation context key ``env_ids``, so this
module depends on pydantic alone.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from mtrl.config.base import ConfigModel
from mtrl.config.core import CoreConfig, CoreShorthand, core_or_none
from mtrl.config.placement import RayConfig, TaskPlacement
from mtrl.names import unknown_env_message, unknown_tracker_message


class TaskConfig(ConfigModel):
    """One task of the multi-task run: an environment and how much of the run it gets."""

    env: str = Field(min_length=1)
    """Env id ``<plugin>/<name>`` as listed by ``mtrl envs``, e.g. ``gymnasium/CartPole-v1``."""
    name: str | None = Field(default=None, min_length=1)
    """Unique task name for metrics and logs; defaults to the env id."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments passed to the env's factory (backend-specific)."""
    num_envs: PositiveInt = 16
    """Env copies each actor of this task steps as one batch."""
    weight: PositiveFloat = 1.0
    """Relative share of learner samples this task should get (normalised over tasks)."""
    learning_rate_scale: PositiveFloat = 1.0
    """Multiplier on the learner's step size for the parameters only this task uses (its
    encoder, policy head and own recurrent core; the shared torso and value head keep the plain
    rate). Adam moves each parameter by about the step size whatever its gradient's size, so
    ``weight`` cannot make a task's own parameters learn faster or slower; this can: above 1 for
    a task bound by how far the optimiser moves it, below 1 for one whose solved policy must
    hold while the others learn (mtrl/learner/optim.py)."""
    reward_scale: PositiveFloat = 1.0
    """Rewards are multiplied by this before learning (returns are reported unscaled)."""
    target_score: float | None = None
    """Mean episode return at which the task counts as solved (reporting, progress scheduling)."""
    seed: int | None = Field(default=None, ge=0)
    """Seed of this task's envs; defaults to the run seed plus the task's index."""
    placement: TaskPlacement = Field(default_factory=TaskPlacement)
    """What each of this task's actors reserves on a Ray node: CPUs, memory, custom resources
    that pin it to nodes (``actors.mode: ray`` only; docs/DISTRIBUTED.md)."""
    anakin: bool = False
    """Run this task Anakin-style (Podracer): its env must be tensor-native (e.g.
    ``tensor/CartPole-v1``); it lives on the learner's device and rollouts run there, with no
    actors and no host copies. Other tasks keep their actors; all share each update."""

    @property
    def key(self) -> str:
        """The task's unique name."""
        return self.name or self.env

    @field_validator("env")
    @classmethod
    def _env_exists(cls, env: str, info: ValidationInfo) -> str:
        known = (info.context or {}).get("env_ids")
        if known is not None and env not in known:
            raise PydanticCustomError(
                "unknown_env", "{message}", {"message": _unknown_env(env, known)}
            )
        return env


def _unknown_env(env_id: str, known: Any) -> str:
    return unknown_env_message(env_id, known)


class SchedulerConfig(ConfigModel):
    """How actor slots are shared between tasks (see mtrl/scheduler)."""

    BUILTIN_POLICIES: ClassVar[tuple[str, ...]] = ("fixed", "balanced", "progress")

    policy: str = Field(default="fixed", min_length=1)
    """Allocation policy by name (``mtrl plugins`` lists those of installed plugins).
    ``fixed``: proportional to task weights; ``balanced``: actors so that each task's share of
    learner samples matches its weight whatever its step cost; ``progress``: more actors to
    tasks learning fastest or furthest from target, with a floor."""
    num_actors: PositiveInt = 2
    """Actor workers in total (a budget shared by all tasks)."""
    min_actors_per_task: int = Field(default=1, ge=0)
    """Floor so no task is starved or forgotten."""
    rebalance_every_s: PositiveFloat = 30.0
    """Seconds between allocation decisions."""
    step_timeout_s: PositiveFloat = 60.0
    """An env step slower than this counts as a hung actor and is restarted."""
    max_restarts: int = Field(default=5, ge=0)
    """Failures of one task's actors before the task is quarantined."""
    warmup_s: float = Field(default=10.0, ge=0)
    """Seconds after a task's first unroll whose timings are ignored (imports, first resets,
    JIT); until the task is warm it gets the fixed split."""
    stats_window: int = Field(default=500, ge=5)
    """Recent unrolls (and step-time samples) behind each task's robust throughput and jitter
    estimates; larger is steadier, smaller follows changes faster."""
    progress_window: int = Field(default=500, ge=60)
    """Recent episodes the learning-progress slope (Theil–Sen) is fitted to, as means of
    consecutive blocks of 20 episodes (so at least 60: three blocks)."""
    progress_floor: float = Field(default=0.25, ge=0, le=1)
    """``progress`` keeps each task's data share at least this fraction of its weight share,
    so solved tasks are not forgotten."""
    share_gate: bool = True
    """With a policy that sets target data shares (``balanced``, ``progress``), the learner
    holds back unrolls of a task ahead of its target by more than one unroll — where the loss
    weights cannot meet the targets (off, or a weight at its cap) and while it has other data
    for its next update (never idling the learner); its actors wait on full slots, leaving the
    cores to the tasks behind. Off: every unroll goes in on arrival."""
    loss_weights: bool = True
    """Scale each task's loss by target share / recent data share, so every task's share of
    the learning signal meets its ``weight`` (or the adaptive policy's share) in every policy,
    gate or not. Off: a task weighs as much as the data its actors deliver."""
    max_loss_weight: float = Field(default=10.0, ge=1.0)
    """Cap of a loss weight (and floor ``1 / cap``): a task whose data share is more than this
    many times below its target stays below it, and the run says so (give it actors or envs)."""
    max_hold_s: PositiveFloat = 5.0
    """Longest an unroll waits at the share gate (bounds its policy lag, and a task that stops
    producing cannot stall the others)."""

    @field_validator("policy")
    @classmethod
    def _policy_exists(cls, policy: str, info: ValidationInfo) -> str:
        # The plugin registry's names come as context key ``scheduler_policies``; without it
        # only the built-ins are known, so typos are still caught.
        known = (info.context or {}).get("scheduler_policies")
        names = sorted(cls.BUILTIN_POLICIES if known is None else known)
        if policy not in names:
            import difflib

            hint = difflib.get_close_matches(policy, names, n=1, cutoff=0.6)
            fix = f"did you mean {hint[0]!r}?" if hint else f"known: {', '.join(names) or '-'}"
            raise PydanticCustomError(
                "unknown_policy",
                "Input should be a registered scheduling policy, not '{policy}'; {fix}",
                {"policy": policy, "fix": fix},
            )
        return policy


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
    core: Annotated[
        CoreConfig | None,
        BeforeValidator(core_or_none, json_schema_input_type=CoreConfig | CoreShorthand | None),
    ] = None
    """A recurrent core after the torso, for tasks that need memory: ``lstm`` or ``gru``, or
    ``{kind, hidden, shared}`` (mtrl/config/core.py); ``none`` (the default): feed-forward.
    Unrolls then carry each env copy's state at their start, and the learner runs the core
    over each unroll from it, resetting it where an episode starts."""


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


_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?|xla(:\d+)?|mps)$")


class LearnerConfig(ConfigModel):
    """IMPALA learner with V-trace and per-task PopArt."""

    algorithm: Literal["impala"] = "impala"
    """The learning rule (IMPALA actor-critic with V-trace correction)."""
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
    optimizer: Literal["adam", "rmsprop"] = "adam"
    """Optimiser."""
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
    deterministic early at a poor behaviour from staying there (mtrl/learner/entropy_floor.py
    says why). Gaussian policies are not affected; 0 turns it off."""
    saturation_ceiling: float = Field(default=0.1, gt=0, le=1)
    """A ceiling on the fraction of a bounded continuous task's action dims whose Gaussian mean
    lies where the tanh squash is flat (``|mean| > 2``): while above it, an extra entropy
    bonus — the squashed action's, whose gradient pulls the mean back where actions differ —
    of ``entropy_coef · (boost − 1)`` grows as under ``entropy_floor`` (boost up to 100) and
    decays back once below. A fast-moving
    policy can throw the mean out there, where every sample is the same env action and the
    policy gradient carries no signal (mtrl/learner/entropy_floor.py says why). 0.1, not
    0.2, since a Gaussian's plain bonus is off (``gaussian_entropy_coef``): without its pull
    the fraction drifted to 0.15–0.18 in some InvertedPendulum runs, one of which then fell
    from 924 to 114; at 0.1 it stayed under 0.1 in 50 runs of 50 (docs/BENCHMARKS.md). Needs
    ``model.squashed_entropy``; 1 turns it off."""
    value_coef: float = Field(default=0.5, ge=0)
    """Weight of the value loss."""
    max_grad_norm: PositiveFloat = 40.0
    """Global gradient-norm clip."""
    popart: PopArtConfig = Field(default_factory=PopArtConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    device: str = "auto"
    """``auto`` (cuda if available, else cpu), ``cpu``, ``cuda[:N]``, ``xla[:N]`` or ``mps``.
    Under torchrun ``cuda`` means each replica's own GPU (its local rank). ``xla`` runs learner
    and inference through torch_xla (TPU; the ``tpu`` extra, torch_xla X.Y needs torch X.Y)."""
    parallel: ParallelConfig = Field(default_factory=ParallelConfig)
    diagnostics_every: int = Field(default=10, ge=0)
    """Updates between measurements of each task's share of the shared torso's gradient
    (``learner/<task>/torso_grad_share``; one extra backward pass per task, single-process
    learners only); 0 turns the measurement off. The other per-task diagnostics are free."""
    torch_threads: PositiveInt = 1
    """Intra-op threads of torch in the learner process. One is fastest when actors and learner
    share few cores: small matmuls gain nothing from more, and OpenMP spin-waits collapse under
    contention (measured 60x slower inference with 2 threads on a loaded 2-core machine)."""

    @field_validator("device")
    @classmethod
    def _device(cls, device: str) -> str:
        if not _DEVICE.match(device):
            raise ValueError(f"unknown device {device!r}; use auto, cpu, cuda[:N], xla[:N] or mps")
        return device


class WandbConfig(ConfigModel):
    """Weights & Biases tracking."""

    mode: Literal["auto", "online", "offline", "disabled"] = "auto"
    """``auto``: online when an API key is configured, else offline (sync later)."""
    project: str = "mtrl"
    """wandb project."""
    entity: str | None = None
    """wandb entity (team or user)."""
    group: str | None = None
    """Run group, e.g. to gather seeds."""
    tags: list[str] = Field(default_factory=list)
    """Run tags."""
    init_timeout_s: PositiveFloat = 30.0
    """Seconds wandb may take to start a run; an online start that fails falls back to offline.
    Training never waits for it (wandb runs on a background thread)."""
    finish_timeout_s: PositiveFloat = 60.0
    """Seconds the end of the run waits for wandb to finish uploading before leaving it."""


def _tracker_exists(name: str, info: ValidationInfo) -> str:
    # The plugin registry's names come as context key ``tracker_names``; without it no tracker
    # is known to this module, so names are taken on trust.
    known = (info.context or {}).get("tracker_names")
    if known is not None and name not in known:
        raise PydanticCustomError(
            "unknown_tracker", "{message}", {"message": unknown_tracker_message(name, known)}
        )
    return name


TrackerName = Annotated[str, Field(min_length=1), AfterValidator(_tracker_exists)]


class TrackingConfig(ConfigModel):
    """Where metrics go."""

    run_dir: Path = Path("runs")
    """Parent directory of run directories ``{config}__{seed}__{time}``."""
    console: Literal["auto", "rich", "plain", "jsonl", "quiet"] = "auto"
    """Console progress: rich on a terminal, plain lines otherwise (auto), JSON lines, or none."""
    log_every_s: PositiveFloat = 5.0
    """Seconds between metric records."""
    csv: bool = True
    """Also write ``metrics.csv`` (one column per metric) beside ``metrics.jsonl``."""
    wandb: WandbConfig = Field(default_factory=WandbConfig)
    trackers: list[TrackerName] | None = None
    """Plugin trackers to run, by name (``mtrl plugins`` lists them); None = every registered
    one; [] = none."""
    final_eval_episodes: int = Field(default=10, ge=0)
    """After training, play this many episodes per task with greedy actions of the final agent
    (eval env seeds, not the training ones; what ``mtrl eval --greedy`` plays) and report their
    mean return beside the training return and in the last metrics record
    (``eval/<task>/greedy_return``); 0 = no final evaluation."""


class CheckpointConfig(ConfigModel):
    """Periodic, atomic checkpoints for exact resume."""

    enabled: bool = True
    """Write checkpoints."""
    every_env_steps: PositiveInt | None = 1_000_000
    """Checkpoint after this many env steps since the last one (None: not by steps)."""
    every_s: PositiveFloat | None = 600.0
    """Checkpoint after this many seconds since the last one (None: not by time)."""
    keep_last: PositiveInt = 3
    """Checkpoints kept; older ones are deleted."""


class ActorsConfig(ConfigModel):
    """Who steps the envs (see mtrl/actors): serially here, or parallel actor workers."""

    mode: Literal["serial", "process", "thread", "ray"] = "process"
    """``serial``: every task stepped in the learner's thread (debugging; no parallelism);
    ``process``: actor worker processes; ``thread``: actor threads in the learner process (for
    envs that release the GIL, e.g. envpool). These two share one batched inference server
    and hand unrolls over through shared memory. ``ray``: actors are Ray actors anywhere in a
    Ray cluster (``actors.ray``), each acting with its own CPU copy of the policy and handing
    unrolls over through Ray's object store (needs ``pip install 'mtrl[ray]'``)."""
    slots_per_actor: int = Field(default=2, ge=1, le=64)
    """Unroll buffers per actor: with 2 or more an actor keeps stepping while the learner reads
    its previous unroll (double buffering)."""
    start_method: Literal["spawn", "forkserver", "fork"] = "spawn"
    """How actor processes start. ``spawn`` is the safe default next to torch's threads."""
    ray: RayConfig = Field(default_factory=RayConfig)
    """The Ray cluster of ``mode: ray`` (ignored by the other modes)."""


class ExperimentConfig(ConfigModel):
    """A multi-task training run."""

    name: str = Field(default="mtrl", pattern=r"^[A-Za-z0-9_.\-]+$")
    """Run name (letters, digits, ``_.-``); run directories start with it."""
    seed: int = Field(default=0, ge=0)
    """Run seed; task seeds and model init derive from it."""
    total_env_steps: PositiveInt = 1_000_000
    """Training stops after this many env steps over all tasks."""
    stop_at_target: bool = False
    """Stop early once every task that has a ``target_score`` reaches it (mean of its last 20
    episodes)."""
    tasks: list[TaskConfig] = Field(min_length=1)
    """The tasks trained together (at least one)."""
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    actors: ActorsConfig = Field(default_factory=ActorsConfig)
    learner: LearnerConfig = Field(default_factory=LearnerConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)

    @model_validator(mode="after")
    def _unique_task_names(self) -> ExperimentConfig:
        seen: dict[str, int] = {}
        for i, task in enumerate(self.tasks):
            if task.key in seen:
                raise PydanticCustomError(
                    "duplicate_task",
                    "task name '{name}' is already used by tasks[{j}]; give each task a "
                    "unique `name`",
                    {"i": i, "j": seen[task.key], "name": task.key},
                )
            seen[task.key] = i
        return self

    def task_seed(self, index: int) -> int:
        """The seed of task ``index``: its own, or the run seed plus its index."""
        task = self.tasks[index]
        return task.seed if task.seed is not None else self.seed + index
