"""The serial actor pool: every task's env stepped in the caller's thread, acting with the
learner's own model (debugging, tests, and often the fastest choice on one or two cores).

Same contract as :class:`~mtrl.actors.pool.ParallelPool` — ``get()`` ready unrolls, learn from
them, ``release()`` them, ``publish()`` the new weights — but nothing runs concurrently, and
an env error stops the pool (:class:`SerialEnvError`, naming the task, the original error as
its cause) instead of counting as a fault: the trainer then checkpoints and says how to go
on. With no actors to move, a scheduler's target data shares become turns
(:mod:`mtrl.actors.turns`): a solved task can step less often, a lagging one more, in the one
thread.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from mtrl.actors import protocol as P
from mtrl.actors.core_states import CoreStates
from mtrl.actors.faults import TaskFaults
from mtrl.actors.inference import InferenceModel
from mtrl.actors.occupancy import ActorOccupancy
from mtrl.actors.pool import TaskSetup
from mtrl.actors.runner import SerialActor
from mtrl.actors.server import ActorEvent, ReadyUnroll
from mtrl.actors.turns import take_turns, turn_rates
from mtrl.actors.unroll import UnrollBuffer
from mtrl.plugins import BatchEnv


class SerialEnvError(RuntimeError):
    """A task's env (or acting on it) failed in the serial pool, which cannot restart it;
    ``cause`` is the env's exception (also the ``__cause__``)."""

    def __init__(self, task: int, name: str, cause: BaseException) -> None:
        super().__init__(f"task {name!r}: {type(cause).__name__}: {cause}")
        self.task, self.name, self.cause = task, name, cause


class SerialPool:
    """Every task's env stepped in this thread: per :meth:`get` as many unrolls as it has
    tasks, one each unless :meth:`set_data_shares` gave the tasks other shares."""

    mode = "serial"

    def __init__(
        self,
        tasks: list[TaskSetup | None],
        envs: list[BatchEnv | None],
        unroll_length: int,
        inference: InferenceModel,
    ) -> None:
        """``tasks[i]`` is None for a task this pool does not run (Anakin, another rank's)."""
        self.tasks = tasks
        self.inference = inference
        self.states = CoreStates(inference)  # a recurrent model's states, keyed by task
        self.actors = [
            SerialActor(t.index, env, unroll_length, t.reward_scale, t.name, inference.state_size)
            for t, env in zip(tasks, envs, strict=True)
            if t is not None and env is not None
        ]
        self.faults = [TaskFaults() for _ in tasks]
        self._owner: dict[int, SerialActor] = {}
        self._rates = np.ones(len(self.actors))  # turns per round, per actor
        self._credit = np.zeros(len(self.actors))

    def set_data_shares(self, shares: list[float | None]) -> None:
        """Target shares of the learner's samples per task (config order; None: no target);
        from the next :meth:`get` on, each task steps in proportion (turns, not actors)."""
        if len(shares) != len(self.tasks):
            raise ValueError(f"{len(shares)} shares for {len(self.tasks)} tasks")
        self._rates = turn_rates(
            [shares[a.task] for a in self.actors],
            [a.unroll_length * a.stepper.env.num_envs for a in self.actors],
        )

    def actors_per_task(self) -> list[int]:
        return [int(t is not None) for t in self.tasks]

    def occupancy(self) -> list[ActorOccupancy]:
        """None: the serial pool fills a new buffer whenever asked, so it never waits."""
        return []

    def _act(self, buf: UnrollBuffer, t: int) -> None:
        self.states.act_into(buf.task, buf, t)

    def get(self, timeout: float = 1.0) -> list[ReadyUnroll]:
        out = []
        turns, self._credit = take_turns(self._credit, self._rates, len(self.actors))
        for k in turns:
            a = self.actors[k]
            s = a.stepper
            env_s0, t0 = s.env_seconds, time.perf_counter()
            try:
                buf = a.collect(self._act)
            except Exception as e:
                raise SerialEnvError(a.task, a.stepper.name, e) from e
            returns, lengths, successes = s.episodes.drain()
            info = P.UnrollInfo(
                slot=-1,
                env_steps=buf.length * buf.num_envs,
                episode_returns=returns,
                episode_lengths=lengths,
                episode_successes=successes,
                env_seconds=s.env_seconds - env_s0,
                wall_seconds=time.perf_counter() - t0,
                member_faults=s.drain_member_faults(),
                member_events=s.drain_member_events(),
                members_present=s.members_present(),
            )
            self._owner[id(buf)] = a
            out.append(ReadyUnroll(a.task, a.task, buf, info))
        return out

    def release(self, unroll: ReadyUnroll) -> None:
        self._owner.pop(id(unroll.buffer)).release(unroll.buffer)

    def publish(self, model: torch.nn.Module, version: int) -> None:
        self.inference.publish(model, version)

    def events(self) -> list[ActorEvent]:
        return []

    def close(self) -> None:
        for a in self.actors:
            a.close()
