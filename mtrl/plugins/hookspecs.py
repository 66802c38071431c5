"""The public plugin contract: every hook mtrl calls, with its documented semantics.

A plugin is a module (or object) with functions decorated by :data:`hookimpl` whose names and
argument names match the specs below. Third-party packages expose it through the entry-point
group ``mtrl`` in their ``pyproject.toml``::

    [project.entry-points.mtrl]
    myplugin = "my_package.mtrl_plugin"

The entry-point name (``myplugin``) is the plugin's name and the namespace of its env ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from mtrl.plugins.algorithm_registrar import AlgorithmRegistrar
    from mtrl.plugins.registrar import EnvRegistrar
    from mtrl.plugins.scheduler_registrar import SchedulerRegistrar
    from mtrl.plugins.tracker_registrar import TrackerRegistrar

PROJECT = "mtrl"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def mtrl_register_envs(register: EnvRegistrar) -> None:
    """Offer environments by calling ``register.env(name, make, ...)`` once per environment.

    ``name`` becomes the id ``"<plugin>/<name>"``. ``make(num_envs, seed, **env_kwargs)`` must
    return an :class:`mtrl.plugins.BatchEnv` of ``num_envs`` copies seeded from ``seed`` that
    follows the batch-env contract (next-step auto-reset, terminated and truncated apart); the
    conformance suite ``mtrl.testing.check_env`` verifies it. Keyword arguments of ``env`` give
    the spaces (else found lazily by building one copy) and metadata: ``description``,
    ``stochastic``, ``step_cost_s``, ``random_score``, ``reference_score``,
    ``max_episode_steps``, ``num_envs_multiple``.

    Registration must be cheap: import heavy simulators inside ``make``, not at module import,
    because every process (including spawned actor workers) loads every plugin. Raise
    :class:`mtrl.errors.PluginUnavailable` when an optional dependency is missing; the plugin
    is then listed as unavailable with your message. Return nothing: a returned value is
    reported as a contract violation.
    """


@hookspec
def mtrl_register_schedulers(register: SchedulerRegistrar) -> None:
    """Offer actor-allocation policies by calling ``register.policy(name, policy, ...)``.

    ``name`` is what a config names in ``scheduler.policy`` (one flat namespace shared by all
    plugins; the built-ins ``fixed``, ``balanced`` and ``progress`` come first, and a second
    registration of a taken name is reported as an error of the later plugin). ``policy`` is
    a pure function ``policy(records, budget) -> mtrl.scheduler.Allocation`` of a sequence of
    :class:`mtrl.scheduler.TaskRecord` (one per task, with robust throughput, jitter, data
    share, score, target, learning progress, failures, ``warm`` and ``quarantined`` flags) and
    a :class:`mtrl.scheduler.Budget` (``slots``, ``min_per_task``, ``floor_share``). It must
    give every task a non-negative actor count, summing to ``budget.slots``, 0 to quarantined
    tasks and at least ``min_per_task`` to the others; :func:`mtrl.scheduler.apportion` does
    the rounding. The runtime calls it every ``scheduler.rebalance_every_s`` seconds, from one
    thread, and logs the allocation's ``reasons``; it must be fast (milliseconds for 100 tasks)
    and free of I/O. ``description`` is one line for listings.

    Registration must be cheap and side-effect free (spawned workers load plugins again). Raise
    :class:`mtrl.errors.PluginUnavailable` when an optional dependency is missing. Return
    nothing: a returned value is reported as a contract violation.
    """


@hookspec
def mtrl_register_trackers(register: TrackerRegistrar) -> None:
    """Offer metric trackers by calling ``register.tracker(name, factory, description="",
    settings=None)``.

    ``name`` is what a config lists in ``tracking.trackers`` (one flat namespace shared by all
    plugins; the built-ins ``jsonl``, ``csv``, ``episodes``, ``wandb`` and ``tensorboard`` come
    first, and a second registration of a taken name is reported as an error of the later
    plugin). The built-ins run in every run, each switched by its own ``tracking`` setting;
    ``tracking.trackers`` selects among the others.

    ``factory(cfg, run_dir, task_names) -> Sink | None`` is called once per training run in the
    trainer process (rank 0 only), after the run directory exists (``run_dir`` is None when the
    run writes none); return None to stay out of this run. The sink's
    ``write(record)`` gets a flat dict of metric name → number every ``tracking.log_every_s``,
    on the training thread: it must return at once (hand slow work to a thread of your own).
    ``close()`` is called once at the end. A factory or ``write`` that raises is reported by
    name and the tracker is turned off; training goes on. ``description`` is one line for
    listings.

    ``settings``: a pydantic model of the tracker's own settings. A config sets them in the
    section ``tracking.<name>:``, which ``mtrl validate`` and ``mtrl train`` check with this
    model (a bad key or value is one line with the file and line; unknown keys are refused
    whatever the model's ``extra``) and ``mtrl schema`` includes. The factory is then called as
    ``factory(cfg, run_dir, task_names, settings)``, with the validated section, or None when
    the config has none (an empty ``<name>:`` gives the model's defaults).

    Registration must be cheap: import the tracking client inside ``factory``. Raise
    :class:`mtrl.errors.PluginUnavailable` when an optional dependency is missing. Return
    nothing: a returned value is reported as a contract violation.
    """


@hookspec
def mtrl_register_algorithms(register: AlgorithmRegistrar) -> None:
    """Offer learning rules by calling ``register.algorithm(name, factory, parallel=(), ...)``.

    ``name`` is what a config names in ``learner.algorithm`` (one flat namespace shared by all
    plugins; the built-in ``impala`` comes first, and a second registration of a taken name is
    reported as an error of the later plugin). ``factory(model, cfg, task_names, ctx, device,
    lr_scales)`` is called once per run in every learner process with the
    :class:`mtrl.learner.model.MultiTaskModel` (per-task encoders and heads, shared torso; not
    yet on ``device``), the run's :class:`mtrl.config.LearnerConfig`, the tasks' names, the
    :class:`mtrl.learner.distributed.DistContext` of this process among torchrun replicas, the
    ``torch.device`` and each task's learning-rate multiplier; it returns an object meeting the
    :class:`mtrl.learner.protocol.Learner` protocol (``model``, ``device``, ``version``,
    ``local_tasks``, ``set_progress``, ``update(batches) -> metrics``, ``pop_diagnostics``,
    ``state_dict``, ``load_state_dict``). ``update`` gets whole unrolls of any tasks mixed (one
    :class:`mtrl.learner.batch.TaskBatch` each) and must bump ``version``; actors then act with
    ``model``'s weights. ``parallel``: which of ``data_parallel``, ``task_sharded``, ``fsdp``
    and ``loose_sync`` (``learner.parallel``) the rule supports; ``mtrl validate`` refuses a
    config that asks a rule for another. ``description`` is one line for listings.

    A rule is one unit: what it needs beyond its factory comes with its registration, so the
    host never tests a rule's name. ``settings``: the pydantic model of the rule's own
    ``learner.<name>:`` section, validated like every other key (file:line, unknown keys
    refused, in ``mtrl schema``); the factory is then called as ``factory(model, cfg,
    task_names, ctx, device, lr_scales, settings)`` with the validated section (the model's
    defaults when the config has none). ``checks(cfg, settings) -> list[str]``: the rule's own
    config checks, one line per problem. ``replay_bytes(cfg, settings, obs_space,
    action_space) -> int`` and ``replay_capacity`` (the rule's default of the experiment's
    ``replay.capacity``, env steps per task, which scales it): the memory of one task's replay,
    for the pre-flight check and its refusal. ``prepare_model(model)``:
    what the rule changes in a fresh model to act, for ``mtrl eval`` (docs/plugins.md).

    Registration must be cheap: import heavy dependencies inside ``factory``. Raise
    :class:`mtrl.errors.PluginUnavailable` when an optional dependency is missing. Return
    nothing: a returned value is reported as a contract violation.
    """
