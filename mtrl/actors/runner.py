"""Stepping one batch env into unroll buffers: the loop every actor runs, serial or parallel.

:class:`EnvStepper` owns a task's batch env and its episode bookkeeping; :meth:`EnvStepper.fill`
runs ``T`` steps into a buffer, asking ``act(buffer, t)`` to write the actions of step ``t``
first. In serial mode ``act`` calls the model directly; in an actor worker it asks the central
inference server, which writes the actions into the shared buffer (:mod:`mtrl.actors.worker`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from mtrl.actors.episodes import EpisodeTracker
from mtrl.actors.unroll import UnrollBuffer, copy_obs_row
from mtrl.learner.distributions import env_actions
from mtrl.plugins import BatchEnv
from mtrl.plugins.spaces import write_item

#: ``act(buffer, t)`` writes ``buffer.actions[t]``, ``behaviour_logp[t]`` and ``versions[t]``.
ActFn = Callable[[UnrollBuffer, int], None]


class EnvFault(RuntimeError):
    """The env misbehaved (raised, or returned non-finite numbers); the unroll is unusable."""


class NonFiniteError(EnvFault):
    """The env returned NaN or inf. Checked once per unroll, before the unroll is handed out,
    so the bad numbers never reach the learner (actor workers report a fault of kind ``nan``)."""


def _check_finite(obs: Any, reward: np.ndarray | None, what: str) -> None:
    """Raise :class:`NonFiniteError` naming the first bad step and env copies.

    ``reward`` and each float array of ``obs`` have a leading time axis (one row per step of
    the unroll; a single row for the observation after reset).
    """
    arrays = [("reward", reward)] if reward is not None else []
    arrays += [
        (f"observation {key!r}" if key else "observation", arr)
        for key, arr in _leaves(obs)
        if isinstance(arr, np.ndarray) and arr.dtype.kind == "f"
    ]
    for name, arr in arrays:
        if np.isfinite(arr).all():
            continue
        bad = ~np.isfinite(arr.reshape(arr.shape[0], arr.shape[1], -1)).all(axis=2)
        t = int(np.flatnonzero(bad.any(axis=1))[0])
        copies = np.flatnonzero(bad[t])[:8].tolist()
        value = f" {arr[t, copies[0]]}" if name == "reward" else ""
        raise NonFiniteError(f"{what}: non-finite {name}{value} at step {t} in env copies {copies}")


def _leaves(obs: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(path, array) of every leaf of a (nested) dict or tuple observation; ``("", obs)`` for
    an array (a tuple's elements are named ``0``, ``1``, ...)."""
    if isinstance(obs, tuple):
        obs = {str(i): v for i, v in enumerate(obs)}
    if not isinstance(obs, dict):
        return [(prefix, obs)]
    return [leaf for k, v in obs.items() for leaf in _leaves(v, f"{prefix}/{k}" if prefix else k)]


def _map(obs: Any, fn: Callable[[np.ndarray], np.ndarray]) -> Any:
    if isinstance(obs, dict):
        return {k: _map(v, fn) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_map(v, fn) for v in obs)
    return fn(obs)


def _steps(obs: Any) -> Any:
    """Observation rows 1..T of an unroll (row 0 was checked when it was written)."""
    return _map(obs, lambda a: a[1:])


def _leading_axis(obs: Any) -> Any:
    """A batch observation as a one-step unroll."""
    return _map(obs, lambda a: a[None])


class EnvStepper:
    """Steps ``env`` into unroll buffers; records unscaled episode returns and step times."""

    def __init__(self, env: BatchEnv, reward_scale: float, name: str = "env") -> None:
        self.env = env
        self.name = name
        self.action_space = env.single_action_space
        self.reward_scale = np.float32(reward_scale)
        self.episodes = EpisodeTracker(env.num_envs)
        self.prev_done = np.zeros(env.num_envs, bool)
        self.env_steps = 0
        self.env_seconds = 0.0  # time spent inside env.step since the last drain
        self._success: np.ndarray | None = None  # [T, N], made when the env first reports it
        self._first_obs = env.reset()
        _check_finite(_leading_axis(self._first_obs), None, f"{name} (reset)")

    def start(self, buf: UnrollBuffer) -> None:
        """Write the first observation into row 0 of the first buffer."""
        write_item(buf.obs, 0, self._first_obs)
        self._first_obs = None

    @staticmethod
    def carry(src: UnrollBuffer, dst: UnrollBuffer) -> None:
        """The bootstrap observation of ``src`` becomes row 0 of ``dst``."""
        copy_obs_row(dst.obs, 0, src.obs, src.length)

    def fill(self, buf: UnrollBuffer, act: ActFn) -> None:
        """Run ``buf.length`` steps; row 0 of ``buf.obs`` must already hold the current obs.

        The step loop only writes the env's output and ``valid[t]`` (whether step ``t`` is a
        genuine step, not a reset step), which is written before ``act(buf, t)``: a recurrent
        policy zeroes a copy's state after its reset step (:mod:`mtrl.actors.core_states`). The
        finiteness check, episode accounting and reward scaling run once over the whole unroll
        (vectorised), so the per-step overhead stays small beside a microsecond env such as
        CartPole.
        """
        env, clock = self.env, time.perf_counter
        last = buf.length - 1
        np.logical_not(self.prev_done, out=buf.valid[0])
        for t in range(buf.length):
            act(buf, t)
            actions = env_actions(self.action_space, buf.actions[t])
            t0 = clock()
            out = env.step(actions)
            self.env_seconds += clock() - t0
            buf.rewards[t] = out.reward
            buf.terminated[t] = out.terminated
            buf.truncated[t] = out.truncated
            if out.success is not None:
                self._success_rows(buf)[t] = out.success
            elif self._success is not None:
                self._success[t] = False
            write_item(buf.obs, t + 1, out.obs)
            if out.valid is not None:  # copies the env lost for this step (a restart)
                np.logical_and(buf.valid[t], out.valid, out=buf.valid[t])
            if t < last:  # the step after an episode end is a reset step
                row = buf.valid[t + 1]
                np.logical_or(buf.terminated[t], buf.truncated[t], out=row)
                np.logical_not(row, out=row)
        _check_finite(_steps(buf.obs), buf.rewards, self.name)
        done = buf.terminated | buf.truncated
        self.episodes.record(buf.rewards, done, buf.valid, self._success)
        buf.rewards *= self.reward_scale
        self.prev_done = done[-1].copy()
        self.env_steps += buf.length * buf.num_envs

    def drain_member_faults(self) -> list[tuple]:
        """Failures of single members of the env since the last call (an external env that
        restarts one simulation process alone: :mod:`mtrl.plugins.external.members`), as
        ``(member, first copy, end copy, kind, text, quarantined)``; empty for other envs."""
        pop = getattr(self.env, "pop_member_faults", None)
        if pop is None:
            return []
        return [(f.member, f.start, f.stop, f.kind, f.text, f.quarantined) for f in pop()]

    def drain_member_events(self) -> list[tuple]:
        """Attached codes that joined or left the env since the last call (an external env
        with ``members_dir``: :mod:`mtrl.plugins.external.roster`), as ``(kind, member, first
        copy, end copy, text)``; empty for other envs."""
        pop = getattr(self.env, "pop_member_events", None)
        if pop is None:
            return []
        return [(e.kind, e.member, e.start, e.stop, e.text) for e in pop()]

    def members_present(self) -> int | None:
        """Members of the env present now where they join and leave, else None."""
        if getattr(self.env, "roster", None) is None:
            return None
        return int(self.env.members_present)

    def _success_rows(self, buf: UnrollBuffer) -> np.ndarray:
        """The ``[T, N]`` success flags of the unroll being filled (kept beside the buffer:
        only the episode accounting reads them)."""
        if self._success is None or self._success.shape != buf.rewards.shape:
            self._success = np.zeros(buf.rewards.shape, bool)
        return self._success

    def close(self) -> None:
        self.env.close()


class SerialActor:
    """One task's env stepped in the caller's thread, with a free list of unroll buffers.

    :meth:`collect` fills a free buffer and hands it out; the caller gives it back with
    :meth:`release` once the learner is done with it, so nothing is copied.
    """

    def __init__(
        self,
        task: int,
        env: BatchEnv,
        unroll_length: int,
        reward_scale: float,
        name: str = "",
        state_size: int = 0,
    ) -> None:
        """``state_size``: a recurrent model's state floats per copy (its unrolls carry them)."""
        self.task = task
        self.unroll_length = unroll_length
        self.state_size = state_size
        self.stepper = EnvStepper(env, reward_scale, name or f"task {task}")
        self._free: list[UnrollBuffer] = []
        self._current = self._new_buffer()
        self.stepper.start(self._current)

    def _new_buffer(self) -> UnrollBuffer:
        env = self.stepper.env
        return UnrollBuffer.allocate(
            self.task,
            self.unroll_length,
            env.num_envs,
            env.single_observation_space,
            env.single_action_space,
            self.state_size,
        )

    def collect(self, act: ActFn) -> UnrollBuffer:
        """Fill one unroll; the returned buffer is the caller's until :meth:`release`."""
        buf = self._current
        self.stepper.fill(buf, act)
        self._current = self._free.pop() if self._free else self._new_buffer()
        self.stepper.carry(buf, self._current)
        return buf

    def release(self, buf: UnrollBuffer) -> None:
        self._free.append(buf)

    def close(self) -> None:
        self.stepper.close()
