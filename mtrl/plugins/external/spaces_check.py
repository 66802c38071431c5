"""Checks an external env makes before it launches a code or allocates for its handshake, and
the spaces a handshake declares.

* :func:`command_problem`: the command's program exists and is executable (a shell's status
  127/126, said up front instead of as a crash at start-up);
* :func:`check_size`: the handshake's arrays are of a sane size (a typo such as a
  ``[100000, 100000, 1000]`` observation would otherwise be a numpy allocation failure);
* :func:`check_declared`: the handshake's spaces are the ones the plugin declared at
  registration (which mtrl builds its model and buffers from without launching the code);
* :func:`spaces_from_spec`: the gymnasium spaces of one copy, from a handshake.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import gymnasium as gym
import numpy as np

from mtrl.coupling import protocol as P
from mtrl.errors import UserError
from mtrl.plugins.external.link import SimulationError

#: The largest observation (or action) of one copy a handshake may declare, in bytes.
MAX_COPY_BYTES = 1 << 30


class SpaceMismatchError(SimulationError, UserError):
    """The simulation's handshake disagrees with the spaces declared at registration, or
    declares arrays too large to be meant (a user error where mtrl reports it: exit 2)."""


class SimulationCommandError(SimulationError, UserError):
    """The simulation's command cannot start: its program is missing or not executable."""


def command_problem(argv: Sequence[str], cwd: str | None, env: Mapping[str, str]) -> str | None:
    """Why ``argv`` cannot start (its program not found or not executable), or None."""
    if not argv or not argv[0]:
        return "the command is empty"
    prog = argv[0]
    if "/" not in prog:
        if shutil.which(prog, path=env.get("PATH", os.defpath)) is None:
            return (
                f"command not found: {prog!r} is not on PATH (install it, or give its full "
                "path in the command)"
            )
        return None
    path = Path(prog) if os.path.isabs(prog) else Path(cwd or ".") / prog
    if not path.exists():
        return f"command not found: {prog!r} does not exist" + (
            f" (relative to {cwd or os.getcwd()})" if not os.path.isabs(prog) else ""
        )
    if path.is_dir() or not os.access(path, os.X_OK):
        return f"command not executable: {prog!r} (chmod +x it, or run it through its interpreter)"
    return None


def _bytes(spec: P.ArraySpec) -> int:
    return math.prod(spec.shape) * spec.dtype.itemsize


def check_size(name: str, spec: P.SimSpec) -> None:
    """Refuse a handshake whose observation or action of one copy exceeds
    :data:`MAX_COPY_BYTES`, before anything of that size is allocated."""
    for what, part in (("observation", spec.observation), ("action", spec.action)):
        size = _bytes(part)
        if size > MAX_COPY_BYTES:
            raise SpaceMismatchError(
                f"{name}: the simulation's handshake declares an {what} of shape "
                f"{list(part.shape)} {part.dtype.name} = {size / 2**30:,.1f} GiB per copy, "
                f"over mtrl's limit of {MAX_COPY_BYTES / 2**30:g} GiB: fix the shape in the "
                "spec the code sends (docs/COUPLING.md, section 4)"
            )


def _key(space: gym.Space | None) -> str:
    """What must agree between declared and handshake spaces: kind, dtype, shape."""
    if isinstance(space, gym.spaces.Box):
        return f"{space.dtype}{list(space.shape)}"
    if isinstance(space, gym.spaces.Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, gym.spaces.MultiDiscrete):
        return f"MultiDiscrete({space.nvec.tolist()})"
    return str(space)


def check_declared(
    name: str,
    found: tuple[gym.Space, gym.Space],
    declared: tuple[gym.Space | None, gym.Space | None],
) -> None:
    """Refuse handshake spaces ``found`` that differ from those ``declared`` at registration
    (kind, dtype or shape; bounds may differ); a space not declared is not compared."""
    problems = [
        f"{what} {_key(have)} (handshake) but {_key(want)} (registered)"
        for what, have, want in zip(("observation", "action"), found, declared, strict=True)
        if want is not None and _key(have) != _key(want)
    ]
    if problems:
        raise SpaceMismatchError(
            f"{name}: the simulation's spaces differ from those its plugin registered: "
            + "; ".join(problems)
            + ". Make register.env(observation_space=..., action_space=...) and the spec the "
            "code sends agree"
        )


def _space(spec: P.ArraySpec) -> gym.spaces.Box:
    low, high = spec.low, spec.high
    if spec.dtype.kind in "iu":
        info = np.iinfo(spec.dtype)
        low = np.clip(np.nan_to_num(low, neginf=info.min), info.min, info.max)
        high = np.clip(np.nan_to_num(high, posinf=info.max), info.min, info.max)
    dtype = spec.dtype.newbyteorder("=")
    low = np.broadcast_to(np.asarray(low, dtype), spec.shape)
    high = np.broadcast_to(np.asarray(high, dtype), spec.shape)
    return gym.spaces.Box(low, high, spec.shape, dtype)


def spaces_from_spec(spec: P.SimSpec) -> tuple[gym.Space, gym.Space]:
    """The gymnasium observation and action spaces of one copy, from a handshake."""
    obs = _space(spec.observation)
    if spec.action_kind == "discrete":
        act: gym.Space = gym.spaces.Discrete(spec.action_n)
    elif spec.action_kind == "multidiscrete":
        act = gym.spaces.MultiDiscrete(spec.action_n)
    else:
        act = _space(spec.action)
    return obs, act
