"""The ``external`` env kind: a batch env whose copies live in separate simulation codes.

:class:`ExternalBatchEnv` (built by :class:`~.sim.ExternalSim`, the factory a plugin
registers) launches the command (once for the whole batch, or once per ``copies_per_process``
copies: :mod:`.launch`), or attaches to ``address``, makes the handshake (spaces, dtypes,
shapes and the episode limit come from the simulation), and then speaks the coupling protocol
(docs/COUPLING.md) behind the ordinary :class:`BatchEnv` API. It owns the batch-env rules so
that simulation codes need not: the next-step auto-reset (the STEP request carries a reset
mask) and the time limit (truncation after ``max_episode_steps``). Members that restart alone
are stepped by :mod:`.member_steps`, codes that join and leave are claimed by :mod:`.joins`;
otherwise every process steps in lockstep here.

Faults surface as exceptions the actor layer counts (docs/FAULTS.md): a crashed, killed or
disconnected simulation raises :class:`SimulationCrashed`/:class:`SimulationDisconnected`, an
ERROR reply :class:`SimulationReportedError`, a step slower than ``step_timeout_s``
:class:`SimulationTimeout` (a ``hang``); NaN in observations or rewards is passed through for
the actors' finiteness check. A step slower than half its timeout prints a warning (at most
one a minute per env), so a code that slows down is seen before it is counted as hung.

Checked before anything is launched or allocated: the command's program exists and is
executable (:meth:`~.settings.SimSettings.command_problem`, also asked by ``mtrl validate``
and ``mtrl train``); the handshake's spaces are of a sane size and, when the plugin declared
spaces at registration, the same as those (:class:`SpaceMismatchError`).

``close()`` (also run by the actor when it fails) ends every process of the simulation; the
launcher ends them too if this process dies. Each process's output is logged
(:mod:`.sim_logs`: kept in the run directory during ``mtrl train``).
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mtrl.coupling import announce
from mtrl.coupling import protocol as P
from mtrl.plugins.batch_env import BatchEnv, StepBatch
from mtrl.plugins.external.joins import MemberJoins
from mtrl.plugins.external.launch import open_link
from mtrl.plugins.external.link import Link
from mtrl.plugins.external.member_steps import MemberSteps
from mtrl.plugins.external.members import UP, MemberFault, MemberPolicy, MemberRecord
from mtrl.plugins.external.roster import MemberEvent, Roster
from mtrl.plugins.external.settings import SimSettings
from mtrl.plugins.external.slow_steps import SlowSteps
from mtrl.plugins.external.spaces_check import (
    SpaceMismatchError,
    check_declared,
    check_size,
    spaces_from_spec,
)


class ExternalBatchEnv(MemberSteps, MemberJoins, BatchEnv):
    """``num_envs`` copies served by one or more external simulation processes."""

    def __init__(
        self,
        num_envs: int,
        seed: int,
        sim: SimSettings,
        values: Mapping[str, Any],
        *,
        step_timeout_s: float | None = None,
        members: MemberPolicy | None = None,
        roster: Roster | None = None,
    ) -> None:
        """``members``: whether one failed process restarts alone (module docstring of
        :mod:`.members`); it applies where mtrl launched two or more processes. ``roster``:
        attach to codes that join and leave during the run (:mod:`.roster`)."""
        import zmq

        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = num_envs
        self.step_timeout_s = step_timeout_s or sim.step_timeout_s
        self._sim = sim
        self._ctx = zmq.Context()
        self._links: list[Link | None] = []
        self._dir = Path(tempfile.mkdtemp(prefix="mtrl-sim-"))
        if roster is not None:
            per = num_envs // roster.max_members
        elif sim.address or sim.copies_per_process is None:
            per = num_envs
        else:
            per = sim.copies_per_process
        self._sizes = [min(per, num_envs - i) for i in range(0, num_envs, per)]
        self.name = sim.env_id or str(values.get("name", "external"))
        self._seed, self._values = seed, values
        self._policy = members or MemberPolicy(restart=False)
        self.member_restart = (
            self._policy.restart and sim.command is not None and len(self._sizes) > 1
        )
        starts = np.cumsum([0, *self._sizes]).tolist()
        self.members = [MemberRecord(a, b) for a, b in itertools.pairwise(starts)]
        self._member_faults: list[MemberFault] = []
        self._roster = roster
        self.spec: P.SimSpec | None = None
        self._events: list[MemberEvent] = []
        self._claims: list[Path | None] = [None] * len(self._sizes)
        self._joins = 0
        self._scanned = 0.0
        self._below_since: float | None = None
        self._needs_reset = np.zeros(num_envs, bool)
        self._elapsed = np.zeros(num_envs, np.int64)
        self._started = False
        self._slow = SlowSteps(self.name, self.step_timeout_s)
        try:
            if roster is not None:
                self._await_members()
            else:
                for k, n in enumerate(self._sizes):
                    self._links.append(self._open(k, n, seed + k * per, values))
                self._handshake(seed, per)
        except BaseException:
            self.close()
            raise

    # -- start-up ---------------------------------------------------------------------------
    def _open(self, k: int, n: int, seed: int, values: Mapping[str, Any]) -> Link:
        """The link to process ``k``, attached or launched (:func:`.launch.open_link`)."""
        sim = self._sim
        label = (self.name if sim.env_id else f"external env {self.name!r}") + f" (process {k})"
        log_name = sim.env_id or self.name
        return open_link(self._ctx, sim, label, self._dir, k, n, seed, values, log_name)

    def _handshake(self, seed: int, per: int) -> None:
        """HELLO to every process at once; each must serve its copies, all the same spec."""
        timeout = self._sim.start_timeout_s
        deadline = time.monotonic() + timeout
        seqs = [
            link.send(
                P.HELLO, [], deadline=deadline, timeout_s=timeout, count=n, arg=seed + k * per
            )
            for k, (link, n) in enumerate(zip(self._links, self._sizes, strict=True))
        ]
        specs = []
        for link, seq, n in zip(self._links, seqs, self._sizes, strict=True):
            head, frames = link.recv(seq, deadline=deadline, timeout_s=timeout, what="HELLO")
            if head.count != n or not frames:
                raise P.ProtocolError(
                    f"{link.label}: HELLO reply serves {head.count} copies, not {n}"
                )
            specs.append(P.parse_spec(bytes(frames[0].buffer)))
        spec = specs[0]
        for other in specs[1:]:
            if other.raw != spec.raw:
                raise P.ProtocolError("the simulation processes declared different specs")
        self._adopt(spec)

    def _adopt(self, spec: P.SimSpec) -> None:
        """Take ``spec`` as the batch's (checked against the registration) and allocate."""
        check_size(self.name, spec)
        found = spaces_from_spec(spec)
        check_declared(self.name, found, self._sim.declared)
        self.spec = spec
        self.max_episode_steps = spec.max_episode_steps
        self.single_observation_space, self.single_action_space = found
        self._obs_dtype = spec.observation.dtype
        self._obs_shape = spec.observation.shape
        self._act_dtype = spec.action.dtype
        try:
            self._obs = np.zeros((self.num_envs, *self._obs_shape), self._obs_dtype)
        except MemoryError:
            raise SpaceMismatchError(
                f"{self.name}: no memory for {self.num_envs} observations of shape "
                f"{list(self._obs_shape)} {self._obs_dtype.name}: fewer num_envs, or a smaller "
                "observation"
            ) from None

    # -- the batch-env API -------------------------------------------------------------------
    def _gather(self, op: int, per_link: list[list], what: str) -> list[list]:
        """Send one request to every process, then collect every reply's frames."""
        timeout = self.step_timeout_s
        deadline = time.monotonic() + timeout
        seqs = [
            link.send(op, frames, deadline=deadline, timeout_s=timeout)
            for link, frames in zip(self._links, per_link, strict=True)
        ]
        return [
            link.recv(seq, deadline=deadline, timeout_s=timeout, what=what)[1]
            for link, seq in zip(self._links, seqs, strict=True)
        ]

    def _read_obs(self, frames: list, start: int, n: int, label: str) -> None:
        """Copies ``start`` to ``start + n`` of the observations from a reply's frame 0."""
        data = frames[0].buffer
        want = n * int(np.prod(self._obs_shape, dtype=np.int64)) * self._obs_dtype.itemsize
        if len(data) != want:
            raise P.ProtocolError(f"{label}: observation frame has {len(data)} bytes, not {want}")
        self._obs[start : start + n] = np.frombuffer(data, self._obs_dtype).reshape(
            n, *self._obs_shape
        )

    def reset(self) -> np.ndarray:
        """Reset every copy (RESET to every process); the first observations."""
        if self._roster is not None:
            return self._reset_present()
        if any(m.state != UP for m in self.members):
            raise RuntimeError(
                f"{self.name}: reset() while a simulation process restarts or is quarantined "
                "(a batch env resets once, at its start; its copies reset as they end)"
            )
        replies = self._gather(P.RESET, [[] for _ in self._links], "RESET")
        start = 0
        for link, frames, n in zip(self._links, replies, self._sizes, strict=True):
            if len(frames) != 1:
                raise P.ProtocolError(f"{link.label}: RESET reply needs 1 frame, got {len(frames)}")
            self._read_obs(frames, start, n, link.label)
            start += n
        self._needs_reset[:] = False
        self._elapsed[:] = 0
        self._started = True
        return self._obs.copy()

    def step(self, actions: Any) -> StepBatch:
        """One STEP to every process; copies that ended last step are reset instead."""
        if not self._started:
            raise RuntimeError("external env: call reset() before step()")
        a = np.ascontiguousarray(actions, dtype=self._act_dtype)
        mask = self._needs_reset.astype(np.uint8)
        if self.member_restart or self._roster is not None:
            return self._step_members(a, mask)
        per_link, start = [], 0
        for n in self._sizes:
            per_link.append([a[start : start + n].tobytes(), mask[start : start + n].tobytes()])
            start += n
        began = time.monotonic()
        replies = self._gather(P.STEP, per_link, "STEP")
        self._slow.observe(time.monotonic() - began)
        reward = np.empty(self.num_envs, np.float32)
        terminated = np.empty(self.num_envs, bool)
        truncated = np.empty(self.num_envs, bool)
        start = 0
        for link, frames, n in zip(self._links, replies, self._sizes, strict=True):
            if len(frames) != 4 or len(frames[1]) != 4 * n or len(frames[2]) != n:
                raise P.ProtocolError(f"{link.label}: STEP reply needs 4 frames sized for {n}")
            self._read_obs(frames, start, n, link.label)
            sl = slice(start, start + n)
            reward[sl] = np.frombuffer(frames[1].buffer, "<f4")
            terminated[sl] = np.frombuffer(frames[2].buffer, np.uint8) != 0
            truncated[sl] = np.frombuffer(frames[3].buffer, np.uint8) != 0
            start += n
        resets = self._needs_reset
        self._elapsed = np.where(resets, 0, self._elapsed + 1)
        if self.max_episode_steps is not None:
            truncated |= self._elapsed >= self.max_episode_steps
        truncated &= ~terminated
        reward[resets] = 0.0
        terminated[resets] = False
        truncated[resets] = False
        self._needs_reset = terminated | truncated
        return StepBatch(self._obs.copy(), reward, terminated, truncated)

    @property
    def roster(self) -> Roster | None:
        """The bounds of members that join and leave (None: a fixed set of processes)."""
        return self._roster

    @property
    def members_present(self) -> int:
        """Members stepping now (all of them, unless members restart, join or leave)."""
        return sum(m.state == UP for m in self.members)

    def pop_member_events(self) -> list[MemberEvent]:
        """Joins and leaves since the last call (only where members join and leave)."""
        out, self._events = self._events, []
        return out

    def pop_member_faults(self) -> list[MemberFault]:
        """Member failures since the last call (each restarted alone, or quarantined)."""
        out, self._member_faults = self._member_faults, []
        return out

    def close(self) -> None:
        """CLOSE every simulation and end its processes; safe to call twice. Codes attached
        through ``members_dir`` are left running, unclaimed, for the next trainer."""
        for path in self._claims:
            if path is not None:
                announce.release(path)
        self._claims = [None] * len(self._claims)
        for link in self._links:
            if link is None:
                continue
            if self._roster is not None:
                link.broken = True  # detach without CLOSE: the code waits for the next one
            with contextlib.suppress(Exception):
                link.close()
        self._links = []
        if self._ctx is not None:
            self._ctx.destroy(linger=0)  # also closes a socket whose launch failed
            self._ctx = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def pids(self) -> list[int]:
        """Process ids of the launchers (each the root of one simulation's process tree)."""
        return [link.process.pid for link in self._links if link and link.process is not None]


__all__ = ["ExternalBatchEnv"]
