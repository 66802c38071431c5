"""A task's replay as the experiment's ``replay:`` section says: the one place that turns the
section into samplers, so every replay-based rule draws the same way from the same keys.

A rule builds its own storage (transitions or sequences, sized from ``replay.capacity`` and its
own default) and hands it to :func:`task_replay`; a rule that anneals the importance-sampling
exponent over the run asks :func:`annealed_beta`. With ``replay.shards`` the replay it gets is a
:class:`~mtrl.replay.sharded.ShardedTaskReplay` over Ray actors, with the same methods (the
rule does not know which it has); :func:`replay_metrics` reports what only a sharded one has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from mtrl.actors.shard_insert import ShardRoute
from mtrl.config.replay import ReplayConfig
from mtrl.replay.sampler_choice import make_sampler
from mtrl.replay.sharded import ShardedTaskReplay, ShardGroup
from mtrl.replay.storage import SequenceStorage, TransitionStorage
from mtrl.replay.task_replay import TaskReplay

__all__ = [
    "actor_routes",
    "annealed_beta",
    "make_sampler",
    "replay_metrics",
    "set_beta",
    "set_wait_hook",
    "shard_group",
    "task_replay",
]

_GROUPS: dict[int, tuple[ReplayConfig, ShardGroup]] = {}
"""The shard group of each ``replay:`` section a learner built replays from (the section kept
alive with it, so its id is not reused)."""


def shard_group(replay: ReplayConfig) -> ShardGroup:
    """The shards of the learner whose replays are built from ``replay`` (one group per
    section: the tasks of a ``mixed`` layout share its actors)."""
    entry = _GROUPS.get(id(replay))
    if entry is None:
        entry = _GROUPS[id(replay)] = (replay, ShardGroup(replay))
    return entry[1]


def task_replay(
    storage: TransitionStorage | SequenceStorage, replay: ReplayConfig
) -> TaskReplay | ShardedTaskReplay:
    """``storage`` with the sampler ``replay`` names over its items; with ``replay.shards``,
    a replay like it spread over shard actors (``storage`` is then only its template)."""
    if replay.shards is not None:
        return ShardedTaskReplay(storage, replay, shard_group(replay))
    return TaskReplay(storage, make_sampler(replay, storage.capacity))


def set_wait_hook(replays: Sequence[Any], hook: Callable[[], None] | None) -> None:
    """Have the sharded ones of ``replays`` call ``hook`` while a draw waits for the actors'
    inserts (:attr:`ShardedTaskReplay.while_waiting`)."""
    for r in replays:
        if isinstance(r, ShardedTaskReplay):
            r.while_waiting = hook


def actor_routes(replays: Sequence[Any], replay: ReplayConfig) -> list[ShardRoute | None] | None:
    """Per task, where its Ray actors store their unrolls (:meth:`ShardedTaskReplay.route`),
    for a rule that draws only from its replays; None when they are not sharded or
    ``replay.shards.actor_inserts`` is off (the learner then inserts every unroll)."""
    if replay.shards is None or not replay.shards.actor_inserts:
        return None
    if not all(isinstance(r, ShardedTaskReplay) for r in replays):
        return None
    return [r.route() for r in replays]


def replay_metrics(replays: Iterable[Any]) -> dict[str, float]:
    """What sharded replays report (empty for the learner's own): ``replay/lost_shards``,
    ``replay/lost_items``, the rate limiter's waits (``replay/learner_wait_s``,
    ``replay/insert_wait_s``, seconds so far), ``replay/rate_overruns``,
    ``replay/held_unrolls`` and ``replay/samples_per_insert`` over all tasks; with actors
    inserting, ``replay/actor_inserts``, ``replay/learner_inserts`` (unrolls),
    ``replay/actor_wait_s`` and ``replay/actor_overruns``."""
    sharded = [r for r in replays if isinstance(r, ShardedTaskReplay)]
    if not sharded:
        return {}
    out: dict[str, float] = {}
    for r in sharded:
        for name, value in r.metrics().items():
            out[name] = out.get(name, 0.0) + value
    inserts, samples = out.pop("inserts", 0.0), out.pop("samples", 0.0)
    if inserts:
        out["samples_per_insert"] = samples / inserts
    group = sharded[0].group
    out["lost_shards"] = float(group.lost_shards)
    out["lost_items"] = float(group.lost_items)
    out["shards"] = float(len(group.handles))
    return {f"replay/{k}": v for k, v in out.items()}


def annealed_beta(replay: ReplayConfig, progress: float) -> float:
    """The importance-sampling exponent at ``progress`` (0 to 1) of the run: from
    ``replay.priority_beta`` linearly to 1 (Schaul et al. 2016 anneal it so; the correction
    matters most at convergence)."""
    p = min(max(float(progress), 0.0), 1.0)
    return replay.priority_beta + (1.0 - replay.priority_beta) * p


def set_beta(replays: Iterable[TaskReplay], replay: ReplayConfig, progress: float) -> None:
    """Anneal the prioritized samplers of ``replays`` to :func:`annealed_beta` (nothing for
    uniform ones)."""
    if not replay.prioritized:
        return
    beta = annealed_beta(replay, progress)
    for r in replays:
        if hasattr(r.sampler, "beta"):  # prioritized, or a sharded replay's sampler
            r.sampler.beta = beta
