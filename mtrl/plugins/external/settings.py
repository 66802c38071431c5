"""The settings of an external simulation: how to reach it, and its command template.

:class:`SimSettings` holds the fields of :class:`~mtrl.plugins.external.ExternalSim` (they are
documented there) and answers what they alone decide: the command line of one process, whether
its program can start (:meth:`SimSettings.command_problem`, asked by ``mtrl validate`` and
``mtrl train`` before anything is launched) and whether member bounds fit. The batch env and the
launcher read these settings; only :class:`~mtrl.plugins.external.ExternalSim` builds envs, so
the modules that run a simulation never import the factory that makes them.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import shlex
import shutil
import string
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from mtrl.coupling import curve
from mtrl.plugins.external import sim_logs
from mtrl.plugins.external.link import SECURITY_KWARGS
from mtrl.plugins.external.members import MEMBER_KWARGS
from mtrl.plugins.external.roster import ROSTER_KWARGS, Roster
from mtrl.plugins.external.spaces_check import command_problem

#: env_kwargs every external simulation takes besides its template's fields (``defaults``).
OPTION_KWARGS = (
    "step_timeout_s",
    "copies_per_process",
    *SECURITY_KWARGS,
    *MEMBER_KWARGS,
    *ROSTER_KWARGS,
)


def mpiexec() -> str:
    """The ``mpiexec`` beside this interpreter (the ``mpich`` wheel's), else the one on PATH."""
    local = Path(sys.prefix) / "bin" / "mpiexec"
    return str(local) if local.exists() else (shutil.which("mpiexec") or "mpiexec")


def with_builtins(values: Mapping[str, Any], address: str, n: int, seed: int) -> dict[str, Any]:
    """``values`` with the command template's built-in fields for one process."""
    return {
        **values,
        "address": address,
        "num_envs": n,
        "seed": seed,
        "python": sys.executable,
        "mpiexec": mpiexec(),
    }


@dataclass(frozen=True)
class SimSettings:
    """The fields of :class:`~mtrl.plugins.external.ExternalSim`, checked; see it for each."""

    command: str | Sequence[str] | None = None
    address: str | None = None
    members_dir: str | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    copies_per_process: int | None = None
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    step_timeout_s: float = 120.0
    start_timeout_s: float = 60.0
    heartbeat_s: float = 1.0
    transport: str = "ipc"
    server_key: str | None = None
    insecure: bool = False
    max_message_bytes: int = curve.DEFAULT_MAX_MESSAGE_BYTES
    log_max_bytes: int = sim_logs.DEFAULT_MAX_BYTES
    env_id: str = ""
    declared: tuple[gym.Space | None, gym.Space | None] = (None, None)

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.command, self.address, self.members_dir)) != 1:
            raise ValueError("ExternalSim needs exactly one of command=, address= or members_dir=")
        if self.copies_per_process is not None and self.copies_per_process < 1:
            raise ValueError(f"copies_per_process must be >= 1, got {self.copies_per_process}")
        if self.transport not in ("ipc", "tcp"):
            raise ValueError(f"transport must be 'ipc' or 'tcp', got {self.transport!r}")
        if self.log_max_bytes < 4096:
            raise ValueError(f"log_max_bytes must be >= 4096, got {self.log_max_bytes}")

    def for_env(
        self, env_id: str, observation_space: gym.Space | None, action_space: gym.Space | None
    ) -> SimSettings:
        """This simulation as registered under ``env_id`` with these declared spaces (called
        by :class:`~mtrl.plugins.EnvSpec`)."""
        return dataclasses.replace(self, env_id=env_id, declared=(observation_space, action_space))

    @property
    def keeps_declared_spaces(self) -> bool:
        """Whether every env built has the declared spaces (a handshake that disagrees is
        refused), so that nothing needs to be launched to learn them."""
        return self.declared[0] is not None and self.declared[1] is not None

    def kwargs_problem(self, env_kwargs: Mapping[str, Any]) -> str | None:
        """Why ``env_kwargs`` are refused: keys neither in ``defaults`` nor options of every
        simulation (:data:`OPTION_KWARGS`), each with the closest it takes; None when all are
        taken (asked by ``mtrl validate`` and ``mtrl train``, and by every build)."""
        unknown = sorted(set(env_kwargs) - set(self.defaults) - set(OPTION_KWARGS))
        if not unknown:
            return None
        taken = [*self.defaults, *OPTION_KWARGS]
        hints = [m for k in unknown for m in difflib.get_close_matches(k, taken, n=1)]
        hint = f" (did you mean {' or '.join(map(repr, hints))}?)" if hints else ""
        return (
            f"unexpected env_kwargs {unknown}{hint}; this simulation takes {sorted(self.defaults)}"
        )

    def members_problem(self, env_kwargs: Mapping[str, Any], num_envs: int) -> str | None:
        """Why ``env_kwargs``' member bounds (:mod:`.roster`) are refused for a batch of
        ``num_envs`` copies, or None (asked by ``mtrl validate`` and ``mtrl train``)."""
        kwargs = dict(env_kwargs)
        if self.members_dir is not None:
            kwargs.setdefault("members_dir", self.members_dir)
        if self.command is not None and any(k in kwargs for k in ROSTER_KWARGS):
            return "members_dir and the member bounds apply to attached codes, not a command"
        return Roster.problem(kwargs, num_envs)

    def command_problem(self, env_kwargs: Mapping[str, Any]) -> str | None:
        """Why the command cannot start with ``env_kwargs`` (its program not found or not
        executable), or None; runs ``prepare`` when the program's name needs its output."""
        if self.command is None:
            return None
        values = {**self.defaults, **env_kwargs}
        values.pop("step_timeout_s", None)
        try:
            argv = self.argv(with_builtins(values, "ipc:///check", 1, 0))
        except TypeError:  # a field only prepare fills in
            if self.prepare is None:
                raise
            argv = self.argv(with_builtins(self.prepare(dict(values)), "ipc:///check", 1, 0))
        return command_problem(argv, self.cwd, {**os.environ, **self.env})

    def argv(self, values: Mapping[str, Any]) -> list[str]:
        """The command line for one process, its template filled from ``values``."""
        assert self.command is not None
        parts = shlex.split(self.command) if isinstance(self.command, str) else list(self.command)
        fmt = string.Formatter()
        try:
            return [fmt.vformat(str(p), (), values) for p in parts]
        except KeyError as e:
            raise TypeError(
                f"the command template names {{{e.args[0]}}}, which is neither a built-in "
                "(address, num_envs, seed, python, mpiexec) nor in defaults"
            ) from None
