"""Members that join and leave: the bounds of an attached batch env and its events.

With ``members_dir`` an external env attaches to codes that announce themselves in that
directory (:mod:`mtrl.coupling.announce`) while the run goes on. The batch has a fixed capacity
of ``max_members`` slots of ``num_envs // max_members`` copies each, so the actors, the replay
and the learner always see the same shapes: an empty slot steps nothing and its steps are
marked invalid (``StepBatch.valid``), as a restarting member's are (:mod:`.members`). A code
that announces itself takes a free slot from a fresh reset (a *join*); a code that says
goodbye, or vanishes, has its episodes cut (truncated) and its slot freed (a *leave*). The env
fails (:class:`MembersBelowMinimum`) only when fewer than ``min_members`` are present for
longer than ``member_grace_s``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtrl.coupling.protocol import SimulationError

#: env_kwargs of an attached external env whose members join and leave.
ROSTER_KWARGS = ("members_dir", "min_members", "max_members", "member_grace_s")

#: The state of an empty slot (the other states are those of :mod:`.members`).
EMPTY = "empty"

#: Member event kinds: a code took a slot; one said goodbye; one vanished (killed, lost).
JOIN, LEAVE, VANISHED = "join", "leave", "vanished"


class MembersBelowMinimum(SimulationError):
    """Fewer than ``min_members`` codes were attached for longer than ``member_grace_s``."""


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def folder_problem(folder: str) -> str | None:
    """Why ``members_dir`` cannot serve: a file there, or a directory this process cannot
    write (each code is claimed by creating a file beside its announcement). A directory that
    does not exist yet is fine: the first code to announce itself creates it."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        return f"members_dir {folder} is not a directory"
    if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):
        return (
            f"members_dir {folder} is not writable by this user: mtrl claims each code that "
            "announces itself there by writing a file beside its announcement"
        )
    return None


def where_codes_announce(folder: str) -> str:
    """Where the codes of an env that waits in vain announce themselves, said for its error."""
    missing = "" if Path(folder).is_dir() else " (which does not exist: no code announced itself)"
    return f"codes announce themselves in {folder}{missing}: docs/COUPLING.md, section 12"


@dataclass(frozen=True)
class Roster:
    """Where joining codes announce themselves, and how many the batch needs and holds."""

    members_dir: str
    min_members: int = 1
    max_members: int = 1
    grace_s: float = 60.0

    @staticmethod
    def problem(kwargs: dict[str, Any], num_envs: int | None) -> str | None:
        """Why these env_kwargs' member bounds are refused (one line), or None. A batch of
        ``num_envs`` copies must split evenly into ``max_members`` slots; a smaller one (an
        evaluation's, or one built to learn the spaces) takes ``num_envs`` slots of one copy."""
        if not any(k in kwargs for k in ROSTER_KWARGS):
            return None
        folder = kwargs.get("members_dir")
        if not isinstance(folder, str) or not folder:
            return "min_members, max_members and member_grace_s need members_dir (a directory)"
        place = folder_problem(folder)
        if place:
            return place
        low, high = kwargs.get("min_members", 1), kwargs.get("max_members", num_envs or 1)
        grace = kwargs.get("member_grace_s", 60.0)
        if not _int(low) or low < 1:
            return f"min_members must be an int >= 1, got {low!r}"
        if not _int(high) or high < 1:
            return f"max_members must be an int >= 1, got {high!r}"
        if low > high:
            return f"min_members ({low}) must not exceed max_members ({high})"
        if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not grace > 0:
            return f"member_grace_s must be a number > 0, got {grace!r}"
        if num_envs is not None and num_envs >= high and num_envs % high:
            return (
                f"max_members ({high}) must divide num_envs ({num_envs}): each member serves "
                "num_envs / max_members copies"
            )
        return None

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any], num_envs: int) -> Roster | None:
        """The roster from (and popped out of) ``kwargs``; None without ``members_dir``.
        Raises ``ValueError`` (:meth:`problem`) for bad bounds."""
        problem = cls.problem(kwargs, num_envs)
        got = {k: kwargs.pop(k) for k in ROSTER_KWARGS if k in kwargs}
        if problem:
            raise ValueError(problem)
        if "members_dir" not in got:
            return None
        high = min(got.get("max_members", num_envs), num_envs)  # an env of fewer copies
        return cls(  # (an evaluation's, one probing the spaces) takes fewer codes
            members_dir=got["members_dir"],
            min_members=min(got.get("min_members", 1), high),
            max_members=high,
            grace_s=float(got.get("member_grace_s", 60.0)),
        )


@dataclass(frozen=True)
class MemberEvent:
    """A code joined or left slot ``member`` (copies ``[start, stop)``): :data:`JOIN`,
    :data:`LEAVE` (a goodbye) or :data:`VANISHED`; ``text`` says who and why."""

    kind: str
    member: int
    start: int
    stop: int
    text: str
