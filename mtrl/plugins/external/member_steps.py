"""Members stepped one by one: a member that fails is cut out, restarted alone, or quarantined.

Mixed into :class:`~.env.ExternalBatchEnv` where members restart alone (``member_restart``
with two or more launched processes, :mod:`.members`) or join and leave (:mod:`.roster`,
whose methods the class mixes in from :mod:`.joins`). A step sends STEP to every member that
is up and reads each reply on its own: a member that fails (exit, hang, ERROR, non-finite
values) is cut out of this step, its copies' episodes truncated and the step marked invalid,
and is then launched again or quarantined by :class:`~.members.MemberPolicy`. A member that
starts again makes its HELLO and RESET a step at a time, never holding the batch up.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

import numpy as np

from mtrl.coupling import protocol as P
from mtrl.plugins.batch_env import StepBatch
from mtrl.plugins.external.link import SimulationError
from mtrl.plugins.external.members import (
    HELLO,
    QUARANTINED,
    RESET,
    UP,
    MemberFault,
    fault_kind,
)
from mtrl.plugins.external.roster import JOIN, MemberEvent

if TYPE_CHECKING:
    from mtrl.plugins.external.link import Link
    from mtrl.plugins.external.members import MemberPolicy, MemberRecord
    from mtrl.plugins.external.roster import Roster
    from mtrl.plugins.external.settings import SimSettings
    from mtrl.plugins.external.slow_steps import SlowSteps


class MemberSteps:
    """The stepping of members one by one, for :class:`~.env.ExternalBatchEnv`; it reads the
    env's state named below and its ``_open``, ``_adopt`` and (with a roster) the
    :class:`~.joins.MemberJoins` methods."""

    name: str
    num_envs: int
    step_timeout_s: float
    max_episode_steps: int | None
    spec: P.SimSpec | None
    members: list[MemberRecord]
    _sim: SimSettings
    _links: list[Link | None]
    _roster: Roster | None
    _policy: MemberPolicy
    _member_faults: list[MemberFault]
    _events: list[MemberEvent]
    _obs: np.ndarray
    _needs_reset: np.ndarray
    _elapsed: np.ndarray
    _slow: SlowSteps
    _seed: int

    def _step_members(self, a: np.ndarray, mask: np.ndarray) -> StepBatch:
        """One STEP to every member that is up; a member that fails is cut out of this step
        (its copies' episodes truncated, the step invalid) and restarted or quarantined; the
        members starting again move on without waiting."""
        n, timeout = self.num_envs, self.step_timeout_s
        reward = np.zeros(n, np.float32)
        terminated = np.zeros(n, bool)
        truncated = np.zeros(n, bool)
        valid = np.ones(n, bool)
        failed: dict[int, tuple[str, str]] = {}
        sent: dict[int, int] = {}
        deadline = time.monotonic() + timeout
        if self._roster is not None:
            self._scan_joins(time.monotonic())
        for k, m in enumerate(self.members):
            if m.state != UP:
                valid[m.start : m.stop] = False
                continue
            sl = slice(m.start, m.stop)
            try:
                sent[k] = self._links[k].send(
                    P.STEP,
                    [a[sl].tobytes(), mask[sl].tobytes()],
                    deadline=deadline,
                    timeout_s=timeout,
                )
            except SimulationError as e:
                failed[k] = (fault_kind(e), str(e))
        began = time.monotonic()
        for k, seq in sent.items():
            m, sl = self.members[k], slice(self.members[k].start, self.members[k].stop)
            try:
                _, frames = self._links[k].recv(
                    seq, deadline=deadline, timeout_s=timeout, what="STEP"
                )
            except SimulationError as e:
                failed[k] = (fault_kind(e), str(e))
                continue
            count = m.stop - m.start
            obs = np.frombuffer(frames[0].buffer, self._obs_dtype).reshape(count, *self._obs_shape)
            r = np.frombuffer(frames[1].buffer, "<f4")
            bad = self._non_finite(obs, r)
            if bad:
                failed[k] = ("nan", f"{self._links[k].label}: {bad}")
                continue
            self._obs[sl] = obs
            reward[sl] = r
            terminated[sl] = np.frombuffer(frames[2].buffer, np.uint8) != 0
            truncated[sl] = np.frombuffer(frames[3].buffer, np.uint8) != 0
        self._slow.observe(time.monotonic() - began)
        resets, down = self._needs_reset, ~valid  # down: members not up at this step
        self._elapsed = np.where(resets | down, 0, self._elapsed + 1)
        if self.max_episode_steps is not None:
            truncated |= self._elapsed >= self.max_episode_steps
        truncated &= ~terminated
        quiet = resets | down  # a reset step, or no step at all: reward 0, no flags
        reward[quiet] = 0.0
        terminated[quiet] = False
        truncated[quiet] = False
        now = time.monotonic()
        for k, m in enumerate(self.members):  # restarting ones: a step each, never waiting
            if m.state in (HELLO, RESET) and k not in failed and self._advance(k, now):
                self._needs_reset[m.start : m.stop] = False
                self._elapsed[m.start : m.stop] = 0
        for k, (kind, text) in failed.items():
            sl = slice(self.members[k].start, self.members[k].stop)
            reward[sl], terminated[sl], valid[sl] = 0.0, False, False
            truncated[sl] = ~resets[sl]  # the running episode is cut (none at a reset step)
            self._member_failed(k, kind, text, now)
        self._needs_reset = (terminated | truncated) & valid
        if self._roster is not None:
            self._check_minimum(time.monotonic())
        elif all(m.state == QUARANTINED for m in self.members):
            raise SimulationError(
                f"{self.name}: every simulation process of the batch env is quarantined "
                f"(member faults: {self._member_faults[-1].text if self._member_faults else ''})"
            )
        return StepBatch(self._obs.copy(), reward, terminated, truncated, valid=valid)

    def _non_finite(self, obs: np.ndarray, reward: np.ndarray) -> str:
        """What is not finite in a member's step (empty when all is)."""
        if not np.isfinite(reward).all():
            return (
                f"non-finite reward in copies {np.flatnonzero(~np.isfinite(reward))[:8].tolist()}"
            )
        if obs.dtype.kind == "f" and not np.isfinite(obs).all():
            rows = ~np.isfinite(obs.reshape(len(obs), -1)).all(axis=1)
            return f"non-finite observation in copies {np.flatnonzero(rows)[:8].tolist()}"
        return ""

    def _member_failed(self, k: int, kind: str, text: str, now: float) -> None:
        """Count member ``k``'s failure, end its processes, and launch it again unless it is
        due for quarantine (a launch that fails counts as a failure too)."""
        if self._roster is not None:
            self._member_left(k, kind, text)
            return
        m = self.members[k]
        while True:
            link = self._links[k]
            if link is not None:
                link.broken = True
                with contextlib.suppress(Exception):
                    link.close(grace_s=0.5)
                self._links[k] = None
            quarantined = m.failed(now, self._policy)
            self._member_faults.append(MemberFault(k, m.start, m.stop, kind, text, quarantined))
            if quarantined:
                m.state = QUARANTINED
                return
            m.restarts += 1
            m.seed = self._seed + m.start + self.num_envs * m.restarts
            try:
                self._links[k] = self._open(k, m.stop - m.start, m.seed, self._values)
            except SimulationError as e:
                kind, text = fault_kind(e), str(e)
                continue
            m.state, m.since, m.seq = HELLO, now, 0
            return

    def _advance(self, k: int, now: float) -> bool:
        """Move restarting member ``k`` on without waiting: HELLO once it connected, RESET once
        that was answered; True when its first observations are in (it is up again). A
        failure, or no answer within the start timeout, is a new failure of the member."""
        m, link = self.members[k], self._links[k]
        assert link is not None
        try:
            if m.state == HELLO:
                if m.seq == 0:
                    m.seq = link.try_send(P.HELLO, [], count=m.stop - m.start, arg=m.seed) or 0
                reply = link.poll(m.seq) if m.seq else None
                if reply is not None:
                    spec = P.parse_spec(bytes(reply[1][0].buffer))
                    if self.spec is None:  # the first code to attach sets the batch's spec
                        self._adopt(spec)
                    if spec.raw != self.spec.raw:
                        raise P.ProtocolError(
                            f"{link.label}: the restarted process declared a different spec"
                        )
                    m.seq, m.state = link.try_send(P.RESET, []) or 0, RESET
            if m.state == RESET:
                if m.seq == 0:
                    m.seq = link.try_send(P.RESET, []) or 0
                reply = link.poll(m.seq) if m.seq else None
                if reply is not None:
                    count = m.stop - m.start
                    obs = np.frombuffer(reply[1][0].buffer, self._obs_dtype)
                    obs = obs.reshape(count, *self._obs_shape)
                    bad = self._non_finite(obs, np.zeros(0, np.float32))
                    if bad:
                        self._member_failed(k, "nan", f"{link.label} (reset): {bad}", now)
                        return False
                    self._obs[m.start : m.stop] = obs
                    m.state = UP
                    if self._roster is not None:
                        self._events.append(MemberEvent(JOIN, k, m.start, m.stop, link.address))
                    return True
            if now - m.since > self._sim.start_timeout_s:
                raise link._timeout("HELLO and RESET after a restart", self._sim.start_timeout_s)
        except SimulationError as e:
            self._member_failed(k, fault_kind(e), str(e), now)
        return False
