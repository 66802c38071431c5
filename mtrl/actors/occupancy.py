"""What each actor of a pool is doing with its unroll slots, for the learner's liveness.

An actor hands the learner whole unrolls and may have at most ``slots`` of them out at once
(the backpressure that bounds memory and policy lag). When every started actor has all its
slots with the learner, nothing more can arrive until the learner gives some back: waiting
for a fuller batch would wait forever (:func:`mtrl.train.liveness.no_more_unrolls`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: ``starting``: building and resetting its envs (or, on Ray, waiting for a node);
#: ``stepping``: filling an unroll; ``waiting``: every slot is with the learner.
ActorState = Literal["starting", "stepping", "waiting"]


@dataclass(frozen=True)
class ActorOccupancy:
    """One running actor (not stopping, not failed): its task, state and slots."""

    actor_id: int
    task: int
    started: bool
    held: int  # unrolls of this actor the learner holds (or that wait for it)
    slots: int  # unrolls it may have out at once (``actors.slots_per_actor``)
    columns: int  # env columns of one of its unrolls (its task's ``num_envs``)

    @property
    def state(self) -> ActorState:
        if not self.started:
            return "starting"
        return "waiting" if self.held >= self.slots else "stepping"

    @property
    def capacity(self) -> int:
        """Env columns this actor can have with the learner at once."""
        return self.slots * self.columns
