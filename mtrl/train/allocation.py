"""Between the scheduler and the actors: actor failures into the scheduler, its decisions into
the actor pool and the share gate.

The trainer calls these on every round of its loop. They hold no state of their own: the pool
knows its actors and faults, the :class:`~mtrl.scheduler.Rebalancer` its statistics and
timer, the :class:`~mtrl.train.unroll_queue.UnrollQueue` its gate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from mtrl.actors.pool_protocol import ActorPool, ClusterPool, ScalablePool, TurnTakingPool
from mtrl.errors import UserError
from mtrl.plugins.external.failure_line import condense
from mtrl.scheduler import Rebalancer
from mtrl.train.progress import TaskResult
from mtrl.train.unroll_queue import UnrollQueue

__all__ = [
    "apply_initial",
    "explain_no_steps",
    "observe_faults",
    "rebalance",
    "set_share_targets",
]


def observe_faults(pool: ActorPool, rebalancer: Rebalancer, names: Sequence[str]) -> None:
    """Report the pool's new actor failures and quarantines to the scheduler; raise
    :class:`UserError` once every task is quarantined (nothing left to train)."""
    for ev in pool.events():
        if ev.kind == "quarantine":  # the text names the task, counts, kinds, last error
            print(f"WARNING: {ev.text}")
            rebalancer.quarantine(ev.task)
            continue
        print(f"actor {ev.actor_id} of task {names[ev.task]!r} failed ({ev.kind}): {ev.text}")
        if ev.kind != "lost":  # a lost node says nothing about how reliable the task is
            rebalancer.observe_failure(ev.task, ev.lost_s)
    faults = pool.faults
    for i, f in enumerate(faults):
        if f.quarantined:
            rebalancer.quarantine(i)
    if all(f.quarantined for f in faults):
        problems = [
            f"every task is quarantined after repeated actor failures: task {n!r} quarantined "
            f"after {f.faults} failures ({f.kinds_text()}); the last: {condense(f.last_error)}"
            for n, f in zip(names, faults, strict=True)
        ]  # one line per task: a simulation's with its last output line and its whole log
        raise UserError("\n".join(problems), problems=problems)


def set_share_targets(pool: ActorPool, queue: UnrollQueue, shares: Sequence[float | None]) -> None:
    """Target shares for the gate and the loss weights: the tasks that have one (only the
    rebalancer's actor tasks do) and actors running."""
    actors = pool.actors_per_task()
    queue.set_targets([s if actors[i] > 0 else None for i, s in enumerate(shares)])


def apply_initial(pool: ActorPool, rebalancer: Rebalancer, queue: UnrollQueue) -> None:
    """The scheduler's first decision (its warm-up split), before any actor runs."""
    if not isinstance(pool, ScalablePool | TurnTakingPool):
        return
    first = rebalancer.initial()
    if isinstance(pool, ScalablePool):
        pool.set_actors(first.counts)
    else:
        pool.set_data_shares(first.shares)
    set_share_targets(pool, queue, first.shares)


def rebalance(
    pool: ActorPool, rebalancer: Rebalancer, queue: UnrollQueue, names: Sequence[str]
) -> None:
    """Apply the scheduler's decision when one is due: actors moved (parallel pools) or turns
    re-weighted (the serial pool); the share gate's targets either way."""
    if isinstance(pool, TurnTakingPool):
        decision = rebalancer.decide(pool.actors_per_task())
        if decision is not None:
            pool.set_data_shares(decision.shares)
            set_share_targets(pool, queue, decision.shares)
        return
    if not isinstance(pool, ScalablePool):
        return
    slots = pool.budget_slots() if isinstance(pool, ClusterPool) else None
    if slots is not None:  # Ray: the budget follows the cluster's nodes
        rebalancer.set_slots(slots)
    current = pool.actors_per_task()
    decision = rebalancer.decide(current)
    if decision is None:
        return
    if decision.changed:
        moves = [
            f"{n}: {a} -> {b} ({why})"
            for n, a, b, why in zip(names, current, decision.counts, decision.reasons, strict=True)
            if a != b
        ]
        print("scheduler: " + "; ".join(moves))
        pool.set_actors(decision.counts)
    set_share_targets(pool, queue, decision.shares)


def explain_no_steps(pool: ActorPool, results: list[TaskResult]) -> list[TaskResult]:
    """``results`` with the reason each task that made no env steps has no actor, where the
    pool knows one (a Ray cluster without room for it); unchanged otherwise."""
    if not isinstance(pool, ClusterPool) or all(r.env_steps for r in results):
        return results
    reasons = pool.no_actor_reasons()
    return [
        replace(r, no_steps_reason=reasons[i]) if not r.env_steps and i in reasons else r
        for i, r in enumerate(results)
    ]
