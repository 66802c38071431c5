"""The batch-env contract: every backend steps N copies of one environment at once.

Rules every implementation follows (the conformance suite in :mod:`mtrl.testing` checks them):

* ``reset()`` returns the batch of first observations; ``step(actions)`` returns a
  :class:`StepBatch`. Observations are arrays (or tensors, for device-native envs) whose
  leading dimension is ``num_envs``; a ``Dict`` observation space gives a dict of such arrays.
* ``terminated`` and ``truncated`` are kept apart: termination means the MDP ended (no bootstrap);
  truncation means it was cut (time limit) and the learner bootstraps from the value of the
  observation returned with it, which is the episode's *final* observation.
* **Next-step auto-reset** (gymnasium's default, envpool's and ALE's native rule): after a step
  that returned ``terminated[i] or truncated[i]``, the *next* ``step`` ignores ``actions[i]``,
  resets copy ``i`` and returns its first observation with reward 0 and both flags false. The
  learner masks such reset steps out of its loss (the unroll marks them ``valid = False``).
* Seeding happens at construction: two batch envs made with the same ``seed`` and fed the same
  actions produce identical observations, rewards and flags. Copy ``i`` uses ``seed + i``.
* Rewards are float32 of shape ``(num_envs,)``; flags are bool of shape ``(num_envs,)``.
* ``valid`` is optional: a batch env that can lose single copies for a while (an external
  env restarting one simulation process) marks their steps false, and keeps every shape.
* ``success`` is optional: an env whose task has its own success criterion (Meta-World's
  ``info["success"]``, a goal reached) returns a bool per copy, true at every step where the
  criterion holds; ``None`` where it has none. An episode succeeds if any of its steps does
  (Meta-World's protocol); mtrl reports the success rate per task beside the return.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

Obs = Any  # np.ndarray | dict[str, np.ndarray] | torch.Tensor, leading dim = num_envs


@dataclass(slots=True)
class StepBatch:
    """What one batched step returns (see the module docstring for the auto-reset rule)."""

    obs: Obs
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    success: np.ndarray | None = None
    """Bool per copy: the task's success criterion holds at this step (None: the env has none)."""
    valid: np.ndarray | None = None
    """Bool per copy: false where this step is no genuine step of the copy (its simulation is
    being restarted, or was quarantined: :mod:`mtrl.plugins.external.members`), so the actor
    masks it out of the loss and of the episode records like a reset step. None: all genuine.
    A copy whose episode a failure cut reports ``truncated`` at that (invalid) step."""


class BatchEnv(abc.ABC):
    """N copies of one environment stepped together; subclass this to add a backend."""

    num_envs: int
    single_observation_space: gym.Space
    single_action_space: gym.Space

    @abc.abstractmethod
    def reset(self) -> Obs:
        """Reset every copy and return the batch of first observations."""

    @abc.abstractmethod
    def step(self, actions: Any) -> StepBatch:
        """Apply one action per copy (leading dim ``num_envs``) and return the results."""

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release processes, threads and native handles. Safe to call twice."""

    def __enter__(self) -> BatchEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncBatchEnv(BatchEnv):
    """A batch env that can also step sub-batches asynchronously (envpool's send/recv model).

    ``send(actions, env_ids)`` hands actions to the copies ``env_ids``; ``recv()`` returns the
    next ``batch_size`` copies that finished stepping, as ``(env_ids, StepBatch)``. After
    ``async_reset()`` every copy's first observation arrives through ``recv`` (reward 0, flags
    false). The same next-step auto-reset rule holds per copy. Actors use this to step one half
    of the copies while inference runs on the other half; ``reset``/``step`` still work on the
    whole batch.
    """

    batch_size: int

    @abc.abstractmethod
    def async_reset(self) -> None:
        """Start resetting every copy; results come from :meth:`recv`."""

    @abc.abstractmethod
    def send(self, actions: Any, env_ids: np.ndarray) -> None:
        """Start stepping copies ``env_ids`` with ``actions`` (same leading length)."""

    @abc.abstractmethod
    def recv(self) -> tuple[np.ndarray, StepBatch]:
        """Block until ``batch_size`` copies are ready; return their ids and results."""
