"""The tiny messages between actor workers and the inference server (no arrays, ever).

Arrays live in shared memory (:mod:`mtrl.actors.shm`); these messages only say which slot and
step they concern. Per step an actor sends 7 bytes and receives 1.

actor → server: ``ACT(slot, t)`` "actions for step t of slot, please"; ``UNROLL(info)`` "slot is
full" with episode returns and timings (pickled, once per unroll); ``FAULT(kind, text)`` before
dying (``kind`` is ``raise`` or ``nan``).
server → actor: ``GO`` "your actions are written"; ``RELEASE(slot)`` "the learner is done with
slot"; ``STOP``.
"""

from __future__ import annotations

import pickle
import struct
from dataclasses import dataclass, field

ACT, UNROLL, FAULT, READY = b"A", b"U", b"F", b"R"
GO, RELEASE, STOP = b"G", b"L", b"S"

_SLOT_STEP = struct.Struct("<HI")
_SLOT = struct.Struct("<H")


@dataclass
class UnrollInfo:
    """What an actor reports with each finished unroll (small; pickled once per unroll)."""

    slot: int
    env_steps: int
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    episode_successes: list[bool] = field(default_factory=list)  # empty: the env reports none
    env_seconds: float = 0.0  # time inside env.step during this unroll
    wall_seconds: float = 0.0  # wall time of the whole unroll, waiting for actions included
    member_faults: list[tuple] = field(default_factory=list)
    """Failures of single simulation processes of the actor's batch env, each restarted alone
    or quarantined (:meth:`mtrl.actors.runner.EnvStepper.drain_member_faults`)."""
    member_events: list[tuple] = field(default_factory=list)
    """Attached codes that joined or left the actor's batch env during the unroll
    (:meth:`mtrl.actors.runner.EnvStepper.drain_member_events`)."""
    members_present: int | None = None
    """Members of the actor's batch env present at the unroll's end; None where members do
    not join and leave."""


def act(slot: int, t: int) -> bytes:
    return ACT + _SLOT_STEP.pack(slot, t)


def parse_act(msg: bytes) -> tuple[int, int]:
    return _SLOT_STEP.unpack_from(msg, 1)


def release(slot: int) -> bytes:
    return RELEASE + _SLOT.pack(slot)


def parse_release(msg: bytes) -> int:
    return _SLOT.unpack_from(msg, 1)[0]


def unroll(info: UnrollInfo) -> bytes:
    return UNROLL + pickle.dumps(info, protocol=pickle.HIGHEST_PROTOCOL)


def fault(kind: str, text: str) -> bytes:
    return FAULT + kind.encode("ascii") + b"\n" + text.encode("utf-8", "replace")


def parse_fault(msg: bytes) -> tuple[str, str]:
    """``(kind, text)`` of a ``FAULT`` message."""
    kind, _, text = msg[1:].partition(b"\n")
    return kind.decode("ascii", "replace"), text.decode("utf-8", "replace")


def parse_payload(msg: bytes) -> object:
    """The :class:`UnrollInfo` of an ``UNROLL`` message."""
    return pickle.loads(msg[1:])
