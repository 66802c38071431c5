"""Actor faults: the restart/quarantine policy and the per-task fault counters it keeps.

What counts as a fault and how each kind is detected lives in the pool and the server; this
module holds the rules (back-off, rate-based quarantine; docs/FAULTS.md) and the counters the
trainer logs as ``task/<name>/faults/<kind>``.
"""

from __future__ import annotations

import math
import signal
from collections import deque
from dataclasses import dataclass, field

from mtrl.actors.server import FAULT_KINDS, ActorEvent


@dataclass(frozen=True)
class FaultPolicy:
    """How actor faults are handled (docs/FAULTS.md).

    A failed actor is restarted after ``backoff_base_s · 2^(k-1)`` seconds, capped at
    ``backoff_max_s``, where ``k`` counts the task's failures since its last good unroll.

    Quarantine is rate-based: a task is taken out when, over the last ``window_s`` seconds,
    more than ``max_restarts`` of its actors failed *and* failures were at least
    ``max_failure_rate`` of its unroll attempts (failures + unrolls delivered). A task that
    always fails goes after ``max_restarts + 1`` failures; one that delivers most of its unrolls
    (say 1% failures, at any number of actors) never does, as a lifetime count would have it.
    ``window_s=inf, max_failure_rate=0`` gives the lifetime count.

    ``step_timeout_s``: one env step (from the actions' arrival to the next request) slower than
    this is a hang; ``start_timeout_s``: the same for building and resetting the env;
    ``stop_timeout_s``: an actor asked to stop that is still running after this is killed.
    """

    max_restarts: int = 5
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    step_timeout_s: float = 60.0
    start_timeout_s: float = 300.0
    stop_timeout_s: float = 10.0
    window_s: float = 300.0
    max_failure_rate: float = 0.5

    def backoff(self, streak: int) -> float:
        """Seconds before restarting after the ``streak``-th failure in a row."""
        return min(self.backoff_base_s * 2.0 ** max(streak - 1, 0), self.backoff_max_s)

    def quarantine_due(self, faults: TaskFaults, now: float) -> bool:
        """The quarantine rule (class docstring) applied to one task's record."""
        failures, attempts = faults.recent(now)
        return failures > self.max_restarts and failures >= self.max_failure_rate * attempts


#: The quarantine window is kept as this many time buckets (memory independent of the rate).
_BUCKETS = 100


@dataclass
class TaskFaults:
    """One task's fault record: counters for metrics, the quarantine flag and its reason."""

    faults: int = 0
    """Actor failures of every kind."""
    restarts: int = 0
    """Actors started again after a failure."""
    quarantined: bool = False
    reason: str = ""
    """Why the task was quarantined (the message also sent as a ``quarantine`` event)."""
    last_error: str = ""
    last_kind: str = ""
    by_kind: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAULT_KINDS, 0))
    """Failures per kind: ``raise``, ``nan``, ``exit`` (killed, segfault), ``hang``."""
    streak: int = 0
    """Failures since the task's last good unroll (sets the back-off)."""
    window_s: float = 300.0
    # [bucket, failures, attempts] per window_s / _BUCKETS seconds, oldest first
    _buckets: deque = field(default_factory=deque, repr=False)
    _sums: list[int] = field(default_factory=lambda: [0, 0], repr=False)

    def record_unroll(self, now: float) -> None:
        """An actor of the task delivered an unroll."""
        self.streak = 0
        self._push(now, False)

    def record_fault(self, kind: str, text: str, now: float) -> None:
        """An actor of the task failed with ``kind`` (one of ``FAULT_KINDS``)."""
        self.faults += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        self.last_kind, self.last_error = kind, text
        self.streak += 1
        self._push(now, True)

    def _bucket(self, t: float) -> int:
        return math.floor(t * _BUCKETS / self.window_s) if math.isfinite(self.window_s) else 0

    def _push(self, now: float, failed: bool) -> None:
        key, b = self._bucket(now), self._buckets
        if not b or b[-1][0] != key:
            b.append([key, 0, 0])
        b[-1][1] += failed
        b[-1][2] += 1
        self._sums[0] += failed
        self._sums[1] += 1
        self.recent(now)

    def recent(self, now: float) -> tuple[int, int]:
        """``(failures, attempts)`` within the last ``window_s`` seconds (to 1% of it)."""
        oldest, b = self._bucket(now - self.window_s), self._buckets
        while b and b[0][0] < oldest:
            _, failures, attempts = b.popleft()
            self._sums[0] -= failures
            self._sums[1] -= attempts
        return self._sums[0], self._sums[1]

    def kinds_text(self) -> str:
        """E.g. ``3 raise, 1 hang``."""
        return ", ".join(f"{n} {k}" for k, n in self.by_kind.items() if n) or "none"

    def as_metrics(self) -> dict[str, float]:
        """``faults``, ``faults/<kind>``, ``restarts``, ``quarantined``, for metrics under
        ``task/<name>/``."""
        out: dict[str, float] = {"faults": self.faults}
        out.update({f"faults/{k}": n for k, n in self.by_kind.items()})
        out["restarts"] = self.restarts
        out["quarantined"] = float(self.quarantined)
        return out


def describe_exit(code: int | None, process: str = "actor process") -> str:
    """Why an actor process (or another worker: ``process`` names it) ended, from its exit
    code (negative: killed by that signal)."""
    if code is None:
        return f"the {process} stopped answering (its pipe closed) and could not be reaped"
    if code >= 0:
        return f"the {process} exited with status {code} without being asked to stop"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    why = {
        "SIGKILL": "killed: by hand, or by the kernel's out-of-memory killer",
        "SIGSEGV": "segmentation fault in the env or a native library; the process's Python "
        "stack is on stderr",
        "SIGBUS": "bus error in the env or a native library",
        "SIGABRT": "aborted by a native library",
        "SIGTERM": "terminated from outside",
    }.get(name)
    return f"the {process} exited, killed by {name}" + (f" ({why})" if why else "")


#: The name a fault's text carries when an external env had fewer attached codes than its
#: ``min_members`` for longer than its grace (:class:`mtrl.plugins.external.roster.
#: MembersBelowMinimum`): its task is quarantined at once, not restarted (docs/FAULTS.md).
BELOW_MINIMUM = "MembersBelowMinimum"


class FaultBook:
    """A pool's fault bookkeeping, the same for process, thread and Ray actors: per-task
    :class:`TaskFaults`, the restart queue with back-off, quarantine, and the events the
    trainer reads. The pool detects faults and starts/stops actors; this decides what follows.
    """

    def __init__(self, policy: FaultPolicy, task_names: list[str | None]) -> None:
        self.policy = policy
        self.names = task_names
        self.faults = [TaskFaults(window_s=policy.window_s) for _ in task_names]
        self.restart_at: list[tuple[float, int]] = []  # (monotonic time, task)
        self.events: list[ActorEvent] = []

    def failed(
        self, task: int, actor_id: int, kind: str, text: str, since: float, now: float
    ) -> bool:
        """Count a fault of ``task``'s actor (alive since ``since``, or since its last unroll)
        and schedule a restart after the back-off; True when this fault quarantines the task
        (the pool then stops its other actors)."""
        fp, f = self.policy, self.faults[task]
        f.record_fault(kind, text, now)
        delay = fp.backoff(f.streak)
        self.events.append(ActorEvent(actor_id, task, kind, text, now - since + delay))
        if f.quarantined:
            return False
        if BELOW_MINIMUM in text:  # too few attached codes for too long: no restart helps
            self._quarantine(task, *f.recent(now))
            return True
        if fp.quarantine_due(f, now):
            self._quarantine(task, *f.recent(now))
            return True
        self.restart_at.append((now + delay, task))
        return False

    def _quarantine(self, task: int, failures: int, attempts: int) -> None:
        f, fp = self.faults[task], self.policy
        f.quarantined = True
        f.reason = (
            f"task {self.names[task]!r} quarantined: {failures} of its {attempts} unroll "
            f"attempts in the last {fp.window_s:g}s failed (scheduler.max_restarts="
            f"{fp.max_restarts}); faults so far: {f.kinds_text()}; last error ({f.last_kind}): "
            f"{f.last_error}. Its actors are stopped; the other tasks keep training."
        )
        self.restart_at = [r for r in self.restart_at if r[1] != task]
        self.events.append(ActorEvent(-1, task, "quarantine", f.reason))

    def due(self, now: float) -> list[int]:
        """Tasks whose restart is due now (each counted as a restart), oldest first."""
        due = [task for at, task in self.restart_at if at <= now]
        self.restart_at = [(at, task) for at, task in self.restart_at if at > now]
        out = [task for task in due if not self.faults[task].quarantined]
        for task in out:
            self.faults[task].restarts += 1
        return out

    def pending(self) -> list[int]:
        """The task of every restart still waiting (counted as an actor of its task)."""
        return [task for _, task in self.restart_at]

    def cancel_restart(self, task: int) -> bool:
        """Drop ``task``'s latest pending restart (fewer actors wanted); False if none."""
        mine = [r for r in self.restart_at if r[1] == task]
        if not mine:
            return False
        self.restart_at.remove(max(mine))
        return True

    def pop_events(self) -> list[ActorEvent]:
        """Faults and quarantines since the last call."""
        out, self.events = self.events, []
        return out
