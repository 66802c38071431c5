"""Members that join and leave: attached codes claimed from ``members_dir`` as they come.

Mixed into :class:`~.env.ExternalBatchEnv` when it has a :class:`~.roster.Roster`. At the
start it waits until ``min_members`` codes announced themselves and made their handshake; at
every step it claims newly announced codes for free slots (each then starts a step at a time,
:meth:`~.member_steps.MemberSteps._advance`), frees the slot of a code that said goodbye or
vanished, and fails (:class:`~.roster.MembersBelowMinimum`) once fewer than ``min_members``
were present for longer than ``member_grace_s``.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mtrl.coupling import announce
from mtrl.coupling import protocol as P
from mtrl.plugins.external.link import Link, SimulationError, check_transport
from mtrl.plugins.external.members import HELLO, RESET, UP, fault_kind
from mtrl.plugins.external.roster import (
    EMPTY,
    LEAVE,
    VANISHED,
    MemberEvent,
    MembersBelowMinimum,
    where_codes_announce,
)

if TYPE_CHECKING:
    import zmq

    from mtrl.plugins.external.members import MemberRecord
    from mtrl.plugins.external.roster import Roster
    from mtrl.plugins.external.settings import SimSettings


class MemberJoins:
    """Joins and leaves of attached codes, for :class:`~.env.ExternalBatchEnv`; it reads the
    env's state named below and its ``_advance`` and ``_read_obs``."""

    name: str
    num_envs: int
    step_timeout_s: float
    spec: P.SimSpec | None
    members: list[MemberRecord]
    _sim: SimSettings
    _ctx: zmq.Context | None
    _links: list[Link | None]
    _claims: list[Path | None]
    _roster: Roster | None
    _events: list[MemberEvent]
    _obs: np.ndarray
    _needs_reset: np.ndarray
    _elapsed: np.ndarray
    _started: bool
    _seed: int
    _joins: int
    _scanned: float
    _below_since: float | None

    def _await_members(self) -> None:
        """Attach to codes as they announce themselves until ``min_members`` are up (the first
        one's handshake sets the spec); :class:`MembersBelowMinimum` past ``member_grace_s``."""
        r = self._roster
        assert r is not None
        self._links = [None] * len(self._sizes)
        for m in self.members:
            m.state = EMPTY
        wait = r.grace_s
        deadline = time.monotonic() + wait
        while (present := self.members_present) < r.min_members:
            now = time.monotonic()
            if now > deadline:
                raise MembersBelowMinimum(
                    f"{self.name}: {present} of min_members={r.min_members} simulation codes "
                    f"attached within {wait:g}s ({where_codes_announce(r.members_dir)})"
                )
            self._scanned = 0.0
            self._scan_joins(now)
            for k, m in enumerate(self.members):
                if m.state in (HELLO, RESET):
                    self._advance(k, now)
            time.sleep(0.02)

    def _reset_present(self) -> np.ndarray:
        """RESET every member present; empty or joining slots keep zeros, masked out."""
        timeout = self.step_timeout_s
        for k, m in enumerate(self.members):
            if m.state != UP:
                continue
            link, deadline = self._links[k], time.monotonic() + timeout
            try:
                seq = link.send(P.RESET, [], deadline=deadline, timeout_s=timeout)
                frames = link.recv(seq, deadline=deadline, timeout_s=timeout, what="RESET")[1]
                self._read_obs(frames, m.start, m.stop - m.start, link.label)
            except SimulationError as e:
                self._member_left(k, fault_kind(e), str(e))
        self._needs_reset[:] = False
        self._elapsed[:] = 0
        self._started = True
        self._check_minimum(time.monotonic())
        return self._obs.copy()

    def _scan_joins(self, now: float) -> None:
        """Claim codes newly announced in ``members_dir`` for free slots (at most every 0.2 s);
        each then makes its handshake and reset without the batch waiting (:meth:`_advance`)."""
        r = self._roster
        assert r is not None
        if now - self._scanned < 0.2:
            return
        self._scanned = now
        free = [k for k, m in enumerate(self.members) if m.state == EMPTY]
        if not free:
            return
        for path in announce.unclaimed(r.members_dir):
            if not free:
                return
            address = announce.claim(path)
            if address is None:
                continue
            k = free.pop(0)
            m = self.members[k]
            label = f"{self.name} (member {k} at {address})"
            try:
                check_transport(label, address, self._sim.server_key, self._sim.insecure)
                link = Link(
                    self._ctx,
                    address,
                    bind=False,
                    label=label,
                    server_key=self._sim.server_key,
                    heartbeat_s=self._sim.heartbeat_s,
                    max_message_bytes=self._sim.max_message_bytes,
                )
            except Exception as e:
                announce.release(path, forget=True)
                self._events.append(MemberEvent(VANISHED, k, m.start, m.stop, f"{label}: {e}"))
                free.insert(0, k)
                continue
            self._joins += 1
            m.seed = self._seed + m.start + self.num_envs * self._joins
            m.state, m.since, m.seq = HELLO, now, 0
            self._links[k], self._claims[k] = link, path

    def _member_left(self, k: int, kind: str, text: str) -> None:
        """Free slot ``k``: a goodbye (its announcement withdrawn before its connection
        dropped) or a code that vanished (its announcement forgotten, never attached again)."""
        m, link, path = self.members[k], self._links[k], self._claims[k]
        goodbye = kind == "exit" and path is not None and not announce.present(path)
        if link is not None:
            link.broken = True
            with contextlib.suppress(Exception):
                link.close(grace_s=0.5)
            self._links[k] = None
        if path is not None:
            announce.release(path, forget=not goodbye)
            self._claims[k] = None
        was_up = m.state == UP
        m.state = EMPTY
        if self.spec is not None:
            self._obs[m.start : m.stop] = 0
        if was_up or not goodbye:  # a code that left before it joined is no event
            kind = LEAVE if goodbye else VANISHED
            self._events.append(MemberEvent(kind, k, m.start, m.stop, text))

    def _check_minimum(self, now: float) -> None:
        """Raise :class:`MembersBelowMinimum` once fewer than ``min_members`` were present for
        longer than ``member_grace_s``."""
        r = self._roster
        assert r is not None
        present = self.members_present
        if present >= r.min_members:
            self._below_since = None
            return
        if self._below_since is None:
            self._below_since = now
        elif now - self._below_since > r.grace_s:
            raise MembersBelowMinimum(
                f"{self.name}: {present} simulation code(s) attached, below min_members="
                f"{r.min_members} for over member_grace_s={r.grace_s:g}s "
                f"({where_codes_announce(r.members_dir)})"
            )
