"""Pydantic models of an experiment: what a YAML config may say, with constraints and defaults.

Every field is documented by the docstring under it (exported to JSON Schema for editors).
Everything has a sensible default except the task list. Cross-field checks that need the plugin
registry (does an env id exist?) read it from the validation context key ``env_ids``, so this
module depends on pydantic alone.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from mtrl.config.base import ConfigModel
from mtrl.config.choices import require_registered
from mtrl.config.learner import LearnerConfig
from mtrl.config.placement import RayConfig, TaskPlacement
from mtrl.config.plugin_sections import check_sections
from mtrl.config.replay import ReplayConfig
from mtrl.config.tune import TuneConfig, get_path, search_values, set_path
from mtrl.names import unknown_env_message, unknown_tracker_message


class TaskConfig(ConfigModel):
    """One task of the multi-task run: an environment and how much of the run it gets."""

    env: str = Field(min_length=1)
    """Env id ``<plugin>/<name>`` as listed by ``mtrl envs``, e.g. ``gymnasium/CartPole-v1``."""
    name: str | None = Field(default=None, min_length=1)
    """Unique task name for metrics and logs; defaults to the env id."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments passed to the env's factory (backend-specific). An external env of
    attached codes that join and leave during the run takes ``members_dir``, ``min_members``,
    ``max_members`` and ``member_grace_s`` here (docs/COUPLING.md, section 12)."""
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
    tasks learning fastest or furthest from target, with a floor. In ``actors.mode: serial``
    the policy's data shares become turns in the one thread instead of actors."""
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
    member_restart: bool = True
    """In a batch env of several launched simulation processes (an external env with
    ``copies_per_process``), restart a process that dies, hangs past its step timeout, errs or
    returns NaN alone, while the others keep stepping: its copies' episodes are cut (truncated,
    masked out of the loss) and resume from a fresh reset. Off: such a failure fails the whole
    batch env, and its actor restarts every process (docs/FAULTS.md). A task's ``env_kwargs``
    may set it (and the two below) for its env alone."""
    member_max_restarts: int = Field(default=3, ge=0)
    """A simulation process of a batch env failing more than this many times within
    ``member_window_s`` is quarantined alone: its copies stay in the batch, masked out, and
    the other processes keep training (the task is quarantined only when all are)."""
    member_window_s: PositiveFloat = 300.0
    """Seconds over which a process's failures count towards ``member_max_restarts``."""
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
        names = cls.BUILTIN_POLICIES if known is None else known
        return require_registered(policy, names, "scheduling policy", "unknown_policy")


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


class TensorboardConfig(ConfigModel):
    """TensorBoard event files (needs the ``tensorboard`` package: ``pip install tensorboard``)."""

    enabled: bool = False
    """Write TensorBoard event files: every record's metrics as scalars at its
    ``charts/env_steps``, and the resolved config as text (``tensorboard --logdir`` shows them).
    On without the ``tensorboard`` package installed, ``mtrl train`` stops with an error."""
    dir: Path | None = None
    """Where the event files go. None: ``<run_dir>/tensorboard``. A directory given here gets
    one subdirectory per run, named like its run directory, so ``tensorboard --logdir DIR``
    shows every run side by side."""
    histograms: bool = False
    """Also log, with each record, a histogram of every task's returns of the episodes that
    ended since the record before (``task/<id>/episode_returns``)."""


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
    """Where metrics go. A plugin tracker's settings go in a section named after the tracker
    (``tracking.mlflow:``), checked with the plugin's own model (``mtrl plugins`` lists the
    installed trackers, ``mtrl schema`` their sections)."""

    # Extra keys are plugin trackers' sections, each checked by ``_tracker_sections``.
    model_config = ConfigDict(
        extra="allow", json_schema_extra={"additionalProperties": {"type": "object"}}
    )

    run_dir: Path = Path("runs")
    """Parent directory of run directories ``{config}__{seed}__{time}``."""
    console: Literal["auto", "rich", "plain", "jsonl", "quiet"] = "auto"
    """Console progress: rich on a terminal, plain lines otherwise (auto), JSON lines, or none."""
    log_every_s: PositiveFloat = 5.0
    """Seconds between metric records."""
    csv: bool = True
    """Also write ``metrics.csv`` (one column per metric) beside ``metrics.jsonl``."""
    wandb: WandbConfig = Field(default_factory=WandbConfig)
    tensorboard: TensorboardConfig = Field(default_factory=TensorboardConfig)
    trackers: list[TrackerName] | None = None
    """Plugin trackers to run, by name (``mtrl plugins`` lists them); None = every registered
    one; [] = none. The built-in ones (run files, wandb, TensorBoard) always run, each switched
    by its own setting above."""
    stall_warning_s: float = Field(default=60.0, ge=0)
    """Warn when no learner update has happened for this many seconds and for 20 times the
    slowest recent unroll, saying what the learner waits for (tasks, env columns, actors and
    their slots); repeated at doubling intervals while it lasts. 0 = never."""
    final_eval_episodes: int = Field(default=10, ge=0)
    """After training, play this many episodes per task with greedy actions of the final agent
    (eval env seeds, not the training ones; what ``mtrl eval --greedy`` plays) and report their
    mean return beside the training return and in the last metrics record
    (``eval/<task>/greedy_return``); 0 = no final evaluation."""

    @model_validator(mode="after")
    def _tracker_sections(self, info: ValidationInfo) -> TrackingConfig:
        # The installed trackers' settings models come as context key ``tracker_settings``
        # (mtrl/config/plugin_sections.py says what happens without it).
        extra = self.__pydantic_extra__
        if extra:
            models = (info.context or {}).get("tracker_settings")
            extra.update(check_sections(extra, type(self).model_fields, models))
        return self

    def section(self, tracker: str) -> Any:
        """The settings section of plugin tracker ``tracker`` (``tracking.<tracker>:``): an
        instance of its settings model when the config was validated with the installed
        trackers' models, the plain mapping otherwise; None when the config has none."""
        return (self.__pydantic_extra__ or {}).get(tracker)


class CheckpointConfig(ConfigModel):
    """Periodic, atomic checkpoints for exact resume."""

    enabled: bool = True
    """Write checkpoints."""
    every_env_steps: PositiveInt | None = 1_000_000
    """Checkpoint after this many env steps since the last one (None: not by steps)."""
    every_s: PositiveFloat | None = 60.0
    """Checkpoint after this many seconds since the last one (None: not by time). A crash
    (``kill -9``, a lost node) loses at most this much training, whatever an env step costs:
    a minute of an expensive simulation is a minute of a cheap one. A quickstart checkpoint
    (4.3 MB) takes about 20 ms to write, 0.03% of a minute; where writes take longer (a large
    ``replay``), the interval stretches to 50 times the last write's duration, so checkpoints
    never take more than 2% of a run's time."""
    keep_last: PositiveInt = 3
    """Checkpoints kept; older ones are deleted once a new one is written (the disk needs
    room for ``keep_last + 1`` of them)."""
    on_disk_error: Literal["stop", "continue"] = "stop"
    """What a run does when the disk fails a checkpoint's write (full, read-only, the run
    directory removed): ``stop`` ends the run at once with one line naming the fault and the
    directory and the command that resumes from the newest checkpoint (exit status 2);
    ``continue`` says so once and trains on, trying each later checkpoint again (the run can
    then only be resumed from the last one written). Either way no checkpoint already written
    is lost or replaced by a partial one."""
    replay: bool = False
    """Keep a replay-based rule's replay contents (``learner.algorithm: sac`` or
    ``impala_replay``) in each checkpoint, so a resumed run trains on the same data at once.
    Off: checkpoints stay the size of the model, and a resumed run refills its replay (SAC
    trains again once it holds ``learner.sac.learning_starts`` transitions per task; IMPALA
    with replay trains on fresh unrolls alone until it holds enough to draw). Each
    checkpoint then holds the filled part of every task's replay (``keep_last`` of them on
    disk)."""


class ActorsConfig(ConfigModel):
    """Who steps the envs (see mtrl/actors): serially here, or parallel actor workers."""

    mode: Literal["serial", "process", "thread", "ray"] = "process"
    """``serial``: every task stepped in the learner's thread (debugging; no parallelism);
    ``process``: actor worker processes; ``thread``: actor threads in the learner process (for
    envs that release the GIL, e.g. envpool). These two share one batched inference server
    and hand unrolls over through shared memory. ``ray``: actors are Ray actors anywhere in a
    Ray cluster (``actors.ray``), each acting with its own CPU copy of the policy and handing
    unrolls over through Ray's object store (needs ``pip install 'mtrl[ray]'``)."""
    inference: Literal["auto", "central", "local"] = "auto"
    """Who chooses the actions of ``process`` and ``thread`` actors. ``central``: one
    inference server in the learner's process runs a batched forward per task for every actor
    waiting (Sebulba's arrangement: the forward runs where the model is, on the learner's
    accelerator). ``local``: every actor acts with its own CPU copy of the policy and loads the
    learner's newer weights from shared memory before each step (IMPALA's arrangement): with a
    CPU learner it takes inference off the learner's process, whose two threads would otherwise
    contend for one interpreter lock. ``auto``: ``local`` for ``process`` actors when the
    learner runs on the CPU, else ``central``. ``ray`` actors always act locally; ``serial``
    acts with the learner's model."""
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
    replay: ReplayConfig = Field(default_factory=ReplayConfig)
    """Each task's replay of a replay-based learning rule (``sac``, ``impala_replay``): its
    size and sampler (mtrl/config/replay.py); a rule without a replay ignores it."""
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    tune: TuneConfig | None = None
    """Population-based training of this config (``mtrl tune``, mtrl/config/tune.py); ignored
    by ``mtrl train``."""

    @model_validator(mode="after")
    def _tune_search_fits(self, info: ValidationInfo) -> ExperimentConfig:
        """Every searched path names a numeric field, and every value its distribution can give
        makes a valid config (checked by validating the config with it)."""
        if self.tune is None:
            return self
        if self.tune.metric == "target":
            missing = [
                f"tasks[{i}] ({t.env})" for i, t in enumerate(self.tasks) if t.target_score is None
            ]
            if missing:
                raise ValueError(
                    f"tune.metric: target needs a target_score on every task; {', '.join(missing)} "
                    "has none"
                )
        data = self.model_dump(mode="json", exclude={"tune"})
        for path, values in search_values(self.tune).items():
            try:
                current = get_path(data, path)
            except (KeyError, IndexError, TypeError):
                raise ValueError(
                    f"tune.search: {path!r} names no field of this config (dotted, list items "
                    "by index: learner.learning_rate, tasks.0.learning_rate_scale)"
                ) from None
            if isinstance(current, bool) or not isinstance(current, int | float):
                raise ValueError(
                    f"tune.search: {path!r} is {current!r}, not a number: only numeric fields "
                    "can be searched"
                )
            for value in values:
                if isinstance(current, int) and value != int(value):
                    raise ValueError(
                        f"tune.search: {path} is a whole number; {value} is not (runs round "
                        "the values they are dealt, so give whole bounds or choices)"
                    )
                trial = copy.deepcopy(data)
                set_path(trial, path, int(value) if isinstance(current, int) else value)
                try:
                    ExperimentConfig.model_validate(trial, context=info.context)
                except ValidationError as e:
                    first = e.errors()[0]
                    raise ValueError(
                        f"tune.search: {path} = {value} is not a valid config: {first['msg']}"
                    ) from None
        return self

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

    @model_validator(mode="after")
    def _shards_need_ray(self) -> ExperimentConfig:
        """Replay shards are Ray actors: they need the Ray cluster of ``actors.mode: ray``."""
        if self.replay.shards is not None and self.actors.mode != "ray":
            raise ValueError(
                f"replay.shards needs actors.mode: ray (the shards are Ray actors beside the "
                f"actors); this config has actors.mode: {self.actors.mode}: set actors.mode: "
                "ray or remove replay.shards"
            )
        return self

    @model_validator(mode="after")
    def _learner_sees_replay(self, info: ValidationInfo) -> ExperimentConfig:
        """The learner is built from ``learner`` alone: this is how it learns
        ``checkpoint.replay`` and the ``replay:`` section; then the chosen rule's own checks,
        which may read both (context key ``algorithm_checks``)."""
        self.learner._checkpoint_replay = self.checkpoint.replay
        self.learner._replay = self.replay
        self.learner.check_rule(info.context, ("learner", "algorithm"))
        return self

    def task_seed(self, index: int) -> int:
        """The seed of task ``index``: its own, or the run seed plus its index."""
        task = self.tasks[index]
        return task.seed if task.seed is not None else self.seed + index
