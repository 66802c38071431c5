"""Keeping the learner moving: when to update on fewer env columns than ``batch_size``, and
what to say when no update has happened for far longer than the actors need for an unroll.

The learner takes whole unrolls, and each actor may have at most ``actors.slots_per_actor`` of
them out at once. When the actors together cannot hold ``learner.batch_size`` env columns (few
envs per task, few actors), waiting for a full batch waits forever; so once every started
actor has all its slots with the learner (:func:`no_more_unrolls`), the update takes what is
there, and the run says so once (:func:`short_batch_message`). :class:`StallWatch` and
:func:`stall_report` cover what is left: actors that are starting, restarting, quarantined,
or slower than anyone expected. :class:`Liveness` is what the trainer asks, update by update.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence

from mtrl.actors.occupancy import ActorOccupancy
from mtrl.actors.pool_protocol import ActorPool
from mtrl.actors.server import ReadyUnroll
from mtrl.train.unroll_queue import UnrollQueue

#: A stall is reported after this many times the slowest recent unroll (and the configured
#: minimum, ``tracking.stall_warning_s``).
STALL_UNROLL_FACTOR = 20.0


def no_more_unrolls(occupancy: Sequence[ActorOccupancy]) -> bool:
    """Whether no unroll can arrive before the learner gives slots back: at least one actor
    has started, and every started one has all its slots with the learner. (Actors still
    starting do not count: one that never gets a node must not stop the others' updates.)"""
    started = [o for o in occupancy if o.started]
    return bool(started) and all(o.state == "waiting" for o in started)


def short_batch_message(
    batch_size: int, need: int, occupancy: Sequence[ActorOccupancy], names: Sequence[str]
) -> str | None:
    """Why updates take fewer than ``batch_size`` env columns, when the running actors cannot
    hold ``need`` (the columns actors must bring) even with every slot full; None when they
    can (then the short update was a moment of start-up or restart, not worth a word)."""
    capacity = sum(o.capacity for o in occupancy)
    if capacity >= need:
        return None
    per_task: dict[int, list[ActorOccupancy]] = {}
    for o in occupancy:
        per_task.setdefault(o.task, []).append(o)
    parts = [
        f"{names[t]}: {len(occ)} actor{'s' * (len(occ) != 1)} × {occ[0].slots} slots × "
        f"{occ[0].columns} envs"
        for t, occ in sorted(per_task.items())
    ]
    return (
        f"learner.batch_size asks for {batch_size} env columns, but the actors can hold at "
        f"most {capacity} at once ({'; '.join(parts)}); each update takes what they hold "
        f"rather than wait for more. To update on {batch_size} columns, raise tasks[*].num_envs, "
        f"scheduler.num_actors or actors.slots_per_actor, or set learner.batch_size to "
        f"{capacity + batch_size - need} or less"
    )


class StallWatch:
    """Time since the last update against the actors' recent unroll times: :meth:`due`
    says when a stall is worth reporting (first after ``max(floor_s, 20 × slowest recent
    unroll)``, then at doubling intervals while it lasts)."""

    def __init__(self, floor_s: float, now: float | None = None) -> None:
        self.floor_s = floor_s
        self.last_update = time.monotonic() if now is None else now
        self.unroll_s: deque[float] = deque(maxlen=64)
        self._next: float | None = None

    def unroll(self, wall_s: float) -> None:
        """An actor took ``wall_s`` seconds for an unroll."""
        self.unroll_s.append(wall_s)

    def updated(self, now: float) -> None:
        self.last_update, self._next = now, None

    def threshold_s(self) -> float:
        slowest = max(self.unroll_s, default=0.0)
        return max(self.floor_s, STALL_UNROLL_FACTOR * slowest)

    def due(self, now: float) -> float | None:
        """Seconds without an update when a report is due now, else None."""
        if self.floor_s <= 0:
            return None
        stalled = now - self.last_update
        if stalled < (self._next or self.threshold_s()):
            return None
        self._next = 2 * stalled
        return stalled


def stall_report(
    stalled_s: float,
    slowest_unroll_s: float | None,
    need: int,
    queued: Mapping[int, int],
    occupancy: Sequence[ActorOccupancy],
    actors_per_task: Sequence[int],
    quarantined: Mapping[int, str],
    names: Sequence[str],
    tasks: Sequence[int],
) -> str:
    """What the learner waits for after ``stalled_s`` seconds without an update: the columns
    it needs and has per task (``queued``), and each task's actors — starting, stepping,
    waiting for a free slot, restarting after a fault (counted in ``actors_per_task`` but not
    running), quarantined, or none allotted — for the actor-fed ``tasks``."""
    speed = (
        f"the slowest recent unroll took {slowest_unroll_s:.2f} s"
        if slowest_unroll_s is not None
        else "no unroll has arrived yet"
    )
    have = sum(queued.values())
    held = ", ".join(f"{names[t]} {c}" for t, c in sorted(queued.items()) if c)
    lines = [
        f"no learner update for {stalled_s:.0f} s ({speed}): the learner waits for {need} env "
        f"columns and has {have}" + (f" ({held})" if held else "")
    ]
    states: dict[int, Counter[str]] = {}
    for o in occupancy:
        states.setdefault(o.task, Counter())[o.state] += 1
    words = {
        "starting": "starting (building its envs or waiting for a node)",
        "stepping": "stepping",
        "waiting": "waiting for a free slot (all its unrolls are with the learner)",
    }
    for t in tasks:
        name = names[t]
        if t in quarantined:
            lines.append(f"  {name}: quarantined ({quarantined[t]})")
            continue
        c = states.get(t, Counter())
        running = sum(c.values())
        parts = [f"{n} {words[s]}" for s, n in sorted(c.items())]
        restarting = actors_per_task[t] - running if t < len(actors_per_task) else 0
        if restarting > 0:
            parts.append(f"{restarting} restarting after a fault")
        lines.append(f"  {name}: " + ("; ".join(parts) if parts else "no actor allotted"))
    return "\n".join(lines)


class Liveness:
    """The trainer's side of the above: the unrolls of the next update from ``queue`` (a full
    batch, or every waiting one when no more can come), the note said once when updates are
    short, and the stall reports."""

    def __init__(
        self, queue: UnrollQueue, batch_size: int, names: Sequence[str], stall_warning_s: float
    ) -> None:
        self.queue, self.batch_size, self.names = queue, batch_size, list(names)
        self.stall = StallWatch(stall_warning_s)
        self._short_said = False

    def take(self, pool: ActorPool, need: int) -> list[ReadyUnroll] | None:
        """The next update's unrolls: ``need`` env columns or more, or — when the actors can
        bring no more before the learner gives slots back — every waiting one (the actors may
        hold fewer than ``batch_size`` columns: then waiting would wait forever)."""
        take = self.queue.take(need)
        if take is not None or not len(self.queue):
            return take
        occupancy = pool.occupancy()
        if not no_more_unrolls(occupancy):
            return None
        if not self._short_said:
            self._short_said = True
            note = short_batch_message(self.batch_size, need, occupancy, self.names)
            if note is not None:
                print(f"NOTE: {note}", flush=True)
        return self.queue.take(sum(self.queue.columns().values()))

    def report_stall(self, pool: ActorPool, need: int) -> None:
        """Say what the learner waits for when no update has come for far too long."""
        stalled = self.stall.due(time.monotonic())
        if stalled is None:
            return
        faults = pool.faults
        report = stall_report(
            stalled,
            max(self.stall.unroll_s, default=None),
            need,
            self.queue.columns(),
            pool.occupancy(),
            pool.actors_per_task(),
            {i: f.reason or f.last_error for i, f in enumerate(faults) if f.quarantined},
            self.names,
            [i for i, t in enumerate(pool.tasks) if t is not None],
        )
        print(f"WARNING: {report}", flush=True)
