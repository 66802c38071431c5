"""Members of an external batch env: the rule that restarts one alone, or quarantines it.

A *member* is one launched simulation process of an :class:`~.env.ExternalBatchEnv` (a job
serving ``copies_per_process`` copies). With member restart on, a member that dies, hangs past
the step timeout, answers with an error or returns non-finite observations or rewards is
restarted alone while the other members keep stepping; its copies' episodes are cut (reported
truncated at that step) and its slot resumes from a fresh reset of the new process.

A member that keeps failing is quarantined alone, by the rule the actor faults use for tasks
(:class:`mtrl.actors.faults.FaultPolicy`, with its own settings): more than ``max_restarts``
failures within the last ``window_s`` seconds. Its copies stay in the batch (shapes never
change) but every step of theirs is marked invalid, so nothing of theirs reaches the learner.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: env_kwargs of an external env that set its member policy (the trainer fills them from the
#: ``scheduler.member_*`` settings unless a task's env_kwargs set them).
MEMBER_KWARGS = ("member_restart", "member_max_restarts", "member_window_s")

#: The states of a member: stepping, launched and waiting for its HELLO reply, waiting for
#: its RESET reply, taken out for good.
UP, HELLO, RESET, QUARANTINED = "up", "hello", "reset", "quarantined"


@dataclass(frozen=True)
class MemberPolicy:
    """Whether members restart alone, and when one that keeps failing is quarantined."""

    restart: bool = True
    max_restarts: int = 3
    window_s: float = 300.0

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> MemberPolicy:
        """The policy from (and popped out of) an external env's ``env_kwargs``."""
        got = {k.removeprefix("member_"): kwargs.pop(k) for k in MEMBER_KWARGS if k in kwargs}
        restart = got.get("restart", cls.restart)
        most = got.get("max_restarts", cls.max_restarts)
        window = got.get("window_s", cls.window_s)
        if not isinstance(restart, bool):
            raise ValueError(f"member_restart must be true or false, got {restart!r}")
        if isinstance(most, bool) or not isinstance(most, int) or most < 0:
            raise ValueError(f"member_max_restarts must be an int >= 0, got {most!r}")
        if isinstance(window, bool) or not isinstance(window, (int, float)) or not window > 0:
            raise ValueError(f"member_window_s must be a number > 0, got {window!r}")
        return cls(restart=restart, max_restarts=most, window_s=float(window))


@dataclass(frozen=True)
class MemberFault:
    """One failure of one member: which, its copies ``[start, stop)``, the fault kind (as the
    actor faults name them: ``exit``, ``hang``, ``raise``, ``nan``), why, and whether it got
    the member quarantined."""

    member: int
    start: int
    stop: int
    kind: str
    text: str
    quarantined: bool = False


@dataclass
class MemberRecord:
    """One member's state and fault history."""

    start: int
    stop: int
    state: str = UP
    faults: int = 0
    restarts: int = 0
    since: float = 0.0  # monotonic time the current launch began (its start deadline)
    seq: int = 0  # the request awaiting its reply while starting
    seed: int = 0  # the base seed of its current launch
    _times: deque = field(default_factory=deque, repr=False)

    def failed(self, now: float, policy: MemberPolicy) -> bool:
        """Count a failure at ``now``; True when it quarantines the member."""
        self.faults += 1
        self._times.append(now)
        while self._times and self._times[0] < now - policy.window_s:
            self._times.popleft()
        return len(self._times) > policy.max_restarts


def fault_kind(error: BaseException) -> str:
    """The actor fault kind of a member's failure."""
    from mtrl.plugins.external.link import (
        SimulationCrashed,
        SimulationDisconnected,
        SimulationTimeout,
    )

    if isinstance(error, SimulationTimeout):
        return "hang"
    if isinstance(error, (SimulationCrashed, SimulationDisconnected)):
        return "exit"
    return "raise"
