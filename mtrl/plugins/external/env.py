"""The ``external`` env kind: a batch env whose copies live in separate simulation codes.

A plugin describes how to reach a simulation with :class:`ExternalSim` and registers it like
any other env (an :class:`ExternalSim` is the ``make`` factory)::

    register.env("heat2d", ExternalSim(
        command="{mpiexec} -n {ranks} {binary} {address}",
        defaults={"ranks": 2, "binary": "..."},
    ))

:class:`ExternalBatchEnv` launches the command (once for the whole batch, or once per
``copies_per_process`` copies) through the launcher, or attaches to ``address``, makes the
handshake (spaces, dtypes, shapes and the episode limit come from the simulation), and then
speaks the coupling protocol (docs/COUPLING.md) behind the ordinary :class:`BatchEnv` API.
It owns the batch-env rules so that simulation codes need not: the next-step auto-reset (the
STEP request carries a reset mask) and the time limit (truncation after ``max_episode_steps``).

Faults surface as exceptions the actor layer counts (docs/FAULTS.md): a crashed, killed or
disconnected simulation raises :class:`SimulationCrashed`/:class:`SimulationDisconnected`, an
ERROR reply :class:`SimulationReportedError`, a step slower than ``step_timeout_s``
:class:`SimulationTimeout` (a ``hang``); NaN in observations or rewards is passed through for
the actors' finiteness check. A step slower than half its timeout prints a warning (at most
one a minute per env), so a code that slows down is seen before it is counted as hung.

Checked before anything is launched or allocated: the command's program exists and is
executable (:meth:`ExternalSim.command_problem`, also asked by ``mtrl validate`` and ``mtrl
train``); the handshake's spaces are of a sane size and, when the plugin declared spaces at
registration, the same as those (:class:`SpaceMismatchError`).

``close()`` (also run by the actor when it fails) ends every process of the simulation; the
launcher ends them too if this process dies. Each process's output is logged
(:mod:`.sim_logs`: kept in the run directory during ``mtrl train``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import shlex
import shutil
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from mtrl.coupling import announce, curve
from mtrl.coupling import protocol as P
from mtrl.plugins.batch_env import BatchEnv, StepBatch
from mtrl.plugins.external import sim_logs
from mtrl.plugins.external.link import SECURITY_KWARGS, Link, SimulationError, check_transport
from mtrl.plugins.external.members import (
    HELLO,
    MEMBER_KWARGS,
    QUARANTINED,
    RESET,
    UP,
    MemberFault,
    MemberPolicy,
    MemberRecord,
    fault_kind,
)
from mtrl.plugins.external.roster import (
    EMPTY,
    JOIN,
    LEAVE,
    ROSTER_KWARGS,
    VANISHED,
    MemberEvent,
    MembersBelowMinimum,
    Roster,
)
from mtrl.plugins.external.slow_steps import SlowSteps
from mtrl.plugins.external.spaces_check import (
    SimulationCommandError,
    SpaceMismatchError,
    check_declared,
    check_size,
    command_problem,
    spaces_from_spec,
)

LAUNCHER = Path(P.__file__).resolve().parent / "launcher.py"


def _mpiexec() -> str:
    local = Path(sys.prefix) / "bin" / "mpiexec"
    return str(local) if local.exists() else (shutil.which("mpiexec") or "mpiexec")


@dataclass(frozen=True)
class ExternalSim:
    """How to reach one simulation code; called as ``make(num_envs, seed, **env_kwargs)``.

    ``command``: a template (string, split like a shell would, or a list of arguments) whose
    ``{name}`` fields are filled from ``defaults`` updated by the task's ``env_kwargs`` and
    these built-ins: ``address`` (the ZeroMQ address mtrl bound; the simulation connects to
    it), ``num_envs`` and ``seed`` (of the process: copies and base seed it serves),
    ``python`` (this interpreter) and ``mpiexec`` (the one beside it, from the ``mpich``
    wheel, else on PATH). ``address`` instead of ``command``: attach to a simulation already
    running that bound that address (it serves the whole batch). ``members_dir`` instead:
    attach to every code that announces itself in that directory, as it comes and goes, within
    ``min_members``/``max_members`` (env_kwargs, which may set ``members_dir`` too:
    :mod:`.roster`).

    ``copies_per_process``: copies each launched process serves; None for all of them (one
    process, which steps the batch itself). ``prepare(values) -> values`` runs once per build
    before launching (e.g. to compile the code; must pickle: a module-level function).
    ``env_kwargs`` not named in ``defaults`` are an error (``TypeError``, reported by mtrl with
    the env id).

    Transport security (docs/COUPLING.md, section 2; env_kwargs may set each):
    ``server_key``, the CURVE public key of a simulation attached to over tcp://;
    ``insecure: true`` allows plain tcp:// to a non-loopback address (else refused) and
    launches tcp:// codes without CURVE; ``max_message_bytes``, the largest frame accepted.

    ``copies_per_process`` and the member policy (``member_restart``, ``member_max_restarts``,
    ``member_window_s``: :mod:`.members`) may be set by env_kwargs too.

    ``log_max_bytes``: the cap of each launched process's log (docs/COUPLING.md, section 6).
    ``env_id`` and ``declared`` (the observation and action spaces given to ``register.env``)
    are filled in by mtrl when the env is registered (:meth:`for_env`); errors then name the
    env id, and a handshake that disagrees with the declared spaces is refused.
    """

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
    ) -> ExternalSim:
        """This simulation as registered under ``env_id`` with these declared spaces (called
        by :class:`~mtrl.plugins.EnvSpec`)."""
        return dataclasses.replace(self, env_id=env_id, declared=(observation_space, action_space))

    @property
    def keeps_declared_spaces(self) -> bool:
        """Whether every env built has the declared spaces (a handshake that disagrees is
        refused), so that nothing needs to be launched to learn them."""
        return self.declared[0] is not None and self.declared[1] is not None

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
            argv = self.argv(self._builtins(values, "ipc:///check", 1, 0))
        except TypeError:  # a field only prepare fills in
            if self.prepare is None:
                raise
            argv = self.argv(self._builtins(self.prepare(dict(values)), "ipc:///check", 1, 0))
        return command_problem(argv, self.cwd, {**os.environ, **self.env})

    @staticmethod
    def _builtins(values: Mapping[str, Any], address: str, n: int, seed: int) -> dict[str, Any]:
        """``values`` with the template's built-in fields for one process."""
        return {
            **values,
            "address": address,
            "num_envs": n,
            "seed": seed,
            "python": sys.executable,
            "mpiexec": _mpiexec(),
        }

    def __call__(self, num_envs: int, seed: int = 0, **env_kwargs: Any) -> ExternalBatchEnv:
        unknown = sorted(
            set(env_kwargs)
            - set(self.defaults)
            - {"step_timeout_s", "copies_per_process", *SECURITY_KWARGS, *MEMBER_KWARGS}
            - set(ROSTER_KWARGS)
        )
        if unknown:
            raise TypeError(
                f"unexpected env_kwargs {unknown}; this simulation takes {sorted(self.defaults)}"
            )
        security = {k: env_kwargs.pop(k) for k in SECURITY_KWARGS if k in env_kwargs}
        if "copies_per_process" in env_kwargs:  # one job per copy: members restart alone
            security["copies_per_process"] = env_kwargs.pop("copies_per_process")
        if security:
            return dataclasses.replace(self, **security)(num_envs, seed, **env_kwargs)
        if self.members_dir is not None:
            env_kwargs.setdefault("members_dir", self.members_dir)
        problem = self.members_problem(env_kwargs, num_envs)
        if problem:
            raise ValueError(problem)
        roster = Roster.from_kwargs(env_kwargs, num_envs)
        if roster is None:
            check_transport(
                self.env_id or "external env", self.address, self.server_key, self.insecure
            )
        timeout = float(env_kwargs.pop("step_timeout_s", self.step_timeout_s))
        members = MemberPolicy.from_kwargs(env_kwargs)
        values = {**self.defaults, **env_kwargs}
        if self.prepare is not None:
            values = self.prepare(dict(values))
        return ExternalBatchEnv(
            num_envs, seed, self, values, step_timeout_s=timeout, members=members, roster=roster
        )

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


class ExternalBatchEnv(BatchEnv):
    """``num_envs`` copies served by one or more external simulation processes."""

    def __init__(
        self,
        num_envs: int,
        seed: int,
        sim: ExternalSim,
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
        self._links: list[Link] = []
        self._dir = Path(tempfile.mkdtemp(prefix="mtrl-sim-"))
        if roster is not None:
            per = num_envs // roster.max_members
        elif sim.address or sim.copies_per_process is None:
            per = num_envs
        else:
            per = sim.copies_per_process
        self._sizes = [min(per, num_envs - i) for i in range(0, num_envs, per)]
        self.name = sim.env_id or str(values.get("name", "external"))
        self._seed, self._per, self._values = seed, per, values
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
        sim = self._sim
        label = (self.name if sim.env_id else f"external env {self.name!r}") + f" (process {k})"
        bound = {"heartbeat_s": sim.heartbeat_s, "max_message_bytes": sim.max_message_bytes}
        if sim.address is not None:
            return Link(
                self._ctx, sim.address, bind=False, label=label, server_key=sim.server_key, **bound
            )
        address = f"ipc://{self._dir}/{k}.sock" if sim.transport == "ipc" else "tcp://127.0.0.1:*"
        public, secret = (
            curve.keypair() if address.startswith("tcp") and not sim.insecure else (None, None)
        )
        link = Link(self._ctx, address, bind=True, label=label, server_key=public, **bound)
        if sim.transport == "tcp":
            link.address = address = link.sock.getsockopt_string(__import__("zmq").LAST_ENDPOINT)
        argv = sim.argv(sim._builtins(values, address, n, seed))
        problem = command_problem(argv, sim.cwd, {**os.environ, **sim.env})
        if problem is not None:
            raise SimulationCommandError(f"{label}: {problem}")
        log = sim_logs.new_log(sim.env_id or self.name, self._dir, k)
        cap = ["--log-max-bytes", str(sim.log_max_bytes)]
        launcher = [sys.executable, "-I", str(LAUNCHER), str(os.getpid()), "2.0", *cap, "--"]
        launcher += argv
        with open(log, "ab") as out:
            out.write(f"[mtrl: {shlex.join(argv)}]\n".encode())
            out.flush()
            link.process = subprocess.Popen(
                launcher,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=sim.cwd,
                env=curve.launch_env({**os.environ, **sim.env}, secret, sim.max_message_bytes),
                start_new_session=True,  # Ctrl-C goes to the trainer, which closes us
            )
        link.log = log
        link.label = f"{label}: {shlex.join(argv)}"
        return link

    def _handshake(self, seed: int, per: int) -> None:
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

    # -- members restarted alone (mtrl/plugins/external/members.py) ------------------------
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

    # -- members that join and leave (mtrl/plugins/external/roster.py) ----------------------
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
                    f"attached within {wait:g}s (codes announce themselves in {r.members_dir}: "
                    "docs/COUPLING.md, section 12)"
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
                f"{r.min_members} for over member_grace_s={r.grace_s:g}s (codes announce "
                f"themselves in {r.members_dir}: docs/COUPLING.md, section 12)"
            )

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


__all__ = [
    "ExternalBatchEnv",
    "ExternalSim",
    "SimulationCommandError",
    "SimulationError",
    "SpaceMismatchError",
]
