"""Scheduling: how many actors each task gets, re-decided as statistics arrive.

A policy is a pure function ``policy(records, budget) -> Allocation`` (see
:mod:`mtrl.scheduler.policies`); :class:`TaskStats` turns raw observations into the
:class:`TaskRecord`\\ s it reads. Policies are plugins (hook ``mtrl_register_schedulers``); the
built-ins ``fixed``, ``balanced`` and ``progress`` register through it like any other.

How the runtime drives it (the call site, once per run)::

    from mtrl.scheduler import Budget, TaskStats, get_policy, snapshot

    cfg = load_config(path, env_ids=plugins.envs.ids(),
                      scheduler_policies=plugins.schedulers.names())
    sc = cfg.scheduler
    policy = get_policy(sc.policy, plugins)  # checks each allocation it returns

    def target(task):  # in the units of the scores fed to observe_episode
        spec = plugins.envs.get(task.env)
        if spec.normalized_score(0.0) is None:  # no random/reference score: raw returns
            return task.target_score
        if task.target_score is None:
            return 1.0  # the reference score
        return spec.normalized_score(task.target_score)

    stats = [
        TaskStats(
            task.key,
            task.weight,
            target=target(task),
            window=sc.stats_window,
            warmup_s=sc.warmup_s,
            progress_window=sc.progress_window,
            max_failures=sc.max_restarts,
        )
        for task in cfg.tasks
    ]

Feed each task's stats, from the thread that owns the scheduler:

* ``observe_unroll(env_steps, elapsed_s)`` when an actor hands over an unroll: the env steps
  in it (unroll length × envs of the actor) and the wall seconds from its first step to the
  hand-over, inference waits included, waits for a free slot and env construction excluded;
* ``observe_step_times(seconds)`` with per-batch-step wall times (a sample of them is enough);
* ``observe_delivered(env_steps)`` when the learner consumes an unroll of the task;
* ``observe_episode(score)`` per finished episode, normalised with
  ``EnvSpec.normalized_score`` when it is not ``None`` (the raw return otherwise);
* ``observe_failure(lost_s)`` when an actor of the task crashes or hangs, with the seconds it
  was lost (the crashed part of its unroll plus the restart; the task is quarantined after
  ``max_failures``), or ``quarantine()`` to take it out directly.

Every ``sc.rebalance_every_s`` seconds::

    allocation = policy(snapshot(stats, current_actors), Budget.from_config(sc))
    for name, n in allocation.items():   # a Mapping task name -> actor count
        log(name, n, allocation.reasons[name])

then move actors so each task has ``allocation[name]`` (at unroll boundaries; a moved actor
rebuilds its envs). The counts sum to ``budget.slots`` (0 only if every task is quarantined),
quarantined tasks get 0 and the others at least ``min_actors_per_task``; a third-party policy
that breaks this raises :class:`mtrl.errors.PluginError` naming it (keep the last allocation).
``allocation.shares`` (target data shares, set by ``balanced`` and ``progress``) go to the
learner's :class:`~mtrl.train.share_gate.ShareGate`, which holds back unrolls of tasks ahead
of them. :class:`Rebalancer` is this loop as the trainer runs it;
:mod:`mtrl.scheduler.sim.simulator` runs it on a simulated cluster.
"""

from mtrl.scheduler.policies import apportion, balanced, fixed, progress
from mtrl.scheduler.rebalancer import Decision, Rebalancer, budget_for
from mtrl.scheduler.records import Allocation, Budget, Policy, TaskRecord
from mtrl.scheduler.registry import get_policy, policy_names
from mtrl.scheduler.stats import TaskStats, snapshot

__all__ = [
    "Allocation",
    "Budget",
    "Decision",
    "Policy",
    "Rebalancer",
    "TaskRecord",
    "TaskStats",
    "apportion",
    "balanced",
    "budget_for",
    "fixed",
    "get_policy",
    "policy_names",
    "progress",
    "snapshot",
]
