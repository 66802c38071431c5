"""The Ray pool's warnings of tasks left without a running actor, and the final table's reason
for each.

Three moments, worded by :mod:`mtrl.actors.ray_placement`. When the run's first actors have
been created, each task that gets none because the actors ask for more than the cluster has is
named once, with what to change (:meth:`RoomWarnings.at_start`). While the run goes, a task that
has wanted actors and had none placed for ``actors.ray.starved_warning_s`` is warned of once
until it has one again (:meth:`RoomWarnings.check_starved`, at most once a second: the pool asks
Ray for its actors' state to count them). At the end, each task that wants actors and has none
running gets its reason in a few words (:meth:`RoomWarnings.reasons`).

The pool counts its actors per task (wanted, placed) and hands the counts in; ``local``,
throughout, is the pool's owner's actors per task running outside Ray (the worker processes of
:class:`~mtrl.actors.hybrid_pool.HybridPool`), which count as running. The cluster's live nodes
are read only when there is something to say.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from mtrl.actors.ray_cluster import live_nodes
from mtrl.actors.ray_placement import (
    StarveWatch,
    no_actor_reason,
    no_room_message,
    starved_message,
    unplaced_tasks,
)
from mtrl.config.placement import TaskPlacement

__all__ = ["CHECK_EVERY_S", "RoomWarnings"]

CHECK_EVERY_S = 1.0
"""The least time between two checks for starved tasks."""


class RoomWarnings:
    """What one Ray pool says of its tasks without a running actor (module docstring)."""

    def __init__(
        self,
        names: Sequence[str | None],
        placements: Sequence[TaskPlacement],
        starved_warning_s: float,
    ) -> None:
        """``names``: per task, its name (None: a task this pool runs no actors of)."""
        self.names = list(names)
        self.placements = placements
        self.starve = StarveWatch(starved_warning_s)
        self.said_at_start = False
        self._checked = float("-inf")

    def at_start(
        self, order: Sequence[int], wanted: Sequence[int], local: Sequence[int] | None = None
    ) -> None:
        """Once, when the run's first actors have been created (``order``: each actor's task, in
        the order created; ``wanted``: actors per task): one WARNING per task that gets no
        actor because the actors ask for more than the cluster has (the placement is known
        now; :func:`~mtrl.actors.ray_placement.unplaced_tasks`), saying why and what to change.
        Such a task is not warned of again after ``starved_warning_s`` unless it has had an
        actor in between. A task with a ``local`` actor is not left out."""
        self.said_at_start = True
        if not order:
            return
        nodes = live_nodes()
        now = time.monotonic()
        for task in unplaced_tasks(order, self.placements, nodes):
            name = self.names[task]
            if name is None or (local is not None and local[task] > 0):
                continue
            text = no_room_message(task, name, self.placements, wanted, nodes)
            print(f"WARNING: {text}", flush=True)
            self.starve.since.setdefault(task, now)
            self.starve.said.add(task)

    def due(self, now: float) -> bool:
        """Whether a check for starved tasks is due at ``now`` (at most one every
        :data:`CHECK_EVERY_S`); a due check is noted as made."""
        if now - self._checked < CHECK_EVERY_S:
            return False
        self._checked = now
        return True

    def check_starved(
        self,
        now: float,
        wanted: Sequence[int],
        running: Sequence[int],
        local: Sequence[int] | None = None,
    ) -> None:
        """Warn once (per episode) of each task that has wanted actors and had none running
        (``running``: placed per task) for ``starved_warning_s``, saying why
        (:func:`~mtrl.actors.ray_placement.starved_message`)."""
        if local is not None:
            running = [r + n for r, n in zip(running, local, strict=True)]
            want_any: Sequence[int] = [w + n for w, n in zip(wanted, local, strict=True)]
        else:
            want_any = wanted
        starved = self.starve.starved(now, running, want_any)
        if not starved:
            return
        nodes = live_nodes()
        for task in starved:
            waited = now - self.starve.since[task]
            name = self.names[task]
            if name is None:
                name = str(task)
            text = starved_message(task, name, waited, self.placements, wanted, nodes)
            print(f"WARNING: {text}", flush=True)

    def reasons(
        self, wanted: Sequence[int], running: Sequence[int], local: Sequence[int] | None = None
    ) -> dict[int, str]:
        """Per task that wants actors and has none running, why, in a few words (for the final
        table: :func:`~mtrl.actors.ray_placement.no_actor_reason`)."""
        if local is not None:
            running = [r + n for r, n in zip(running, local, strict=True)]
        idle = [i for i, (w, r) in enumerate(zip(wanted, running, strict=True)) if w and not r]
        if not idle:
            return {}
        nodes = live_nodes()
        return {i: no_actor_reason(i, self.placements, wanted, nodes) for i in idle}
