"""An Ocean env behind mtrl's batch-env contract.

Ocean envs step every copy in C and reset a copy that finished *within the same step*: the
observation returned with the end is already the next episode's first, and the reward of that
step is the env's own (Ocean CartPole gives 0 there). Some envs also end an episode at a step
limit without saying so (no truncation flag). mtrl's contract resets on the *next* step and
keeps termination and truncation apart, so :class:`OceanBatchEnv`:

* marks a copy ``truncated`` when it reaches the env's step limit (``max_episode_steps``, the
  C env's own constant), counting steps per copy as the C env does;
* makes the step after an episode's end the reset step the contract asks for: reward 0, both
  flags false. The C env cannot skip a copy, so that step's action is applied to the new
  episode's first state: the observation returned is its second, and that one transition per
  episode is not learned from (the learner masks reset steps);
* for a truncated copy, the observation returned with the truncation (the one the learner
  bootstraps from) is the new episode's first, not the cut episode's last, which the C env
  does not keep: the bootstrap value is that of a start state.

An episode's return as mtrl counts it therefore leaves out the new episode's first reward
(Ocean CartPole: an episode of ``n`` steps returns ``n - 2`` in mtrl, ``n - 1`` in PufferLib's
``score``). A copy whose episode ends on its very first step (no Ocean CartPole episode does)
would have that end folded into the reset step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pufferlib.ocean.environment import env_creator

from mtrl.plugins import BatchEnv, StepBatch


class OceanBatchEnv(BatchEnv):
    """``num_envs`` copies of Ocean env ``name`` (``puffer_<name>``), seeded with ``seed``."""

    def __init__(
        self,
        name: str,
        num_envs: int,
        seed: int = 0,
        *,
        max_episode_steps: int | None = None,
        **kwargs: Any,
    ) -> None:
        self._env = env_creator(f"puffer_{name}")(num_envs=num_envs, seed=seed, **kwargs)
        if self._env.num_agents != num_envs:
            self._env.close()
            raise ValueError(
                f"pufferlib/{name}: {self._env.num_agents} agents in {num_envs} envs; "
                "only single-agent Ocean envs are supported"
            )
        self.num_envs = num_envs
        self.single_observation_space = self._env.single_observation_space
        self.single_action_space = self._env.single_action_space
        self._seed = seed
        self._limit = max_episode_steps
        self._steps = np.zeros(num_envs, dtype=np.int64)
        self._resetting = np.zeros(num_envs, dtype=bool)
        self._closed = False

    def reset(self) -> np.ndarray:
        obs, _ = self._env.reset(seed=self._seed)
        self._steps[:] = 0
        self._resetting[:] = False
        return np.array(obs, copy=True)

    def step(self, actions: Any) -> StepBatch:
        obs, reward, terminals, truncations, _ = self._env.step(np.asarray(actions))
        reward = np.array(reward, dtype=np.float32)
        terminated = np.array(terminals, dtype=bool)
        truncated = np.array(truncations, dtype=bool)
        self._steps += 1
        if self._limit is not None:
            # The C env reset the copies that reached its limit; it does not flag them.
            truncated |= (self._steps >= self._limit) & ~terminated
        ended = terminated | truncated
        self._steps[ended] = 0
        # The step after an end: the contract's reset step (module docstring).
        was = self._resetting
        reward[was] = 0.0
        terminated[was] = False
        truncated[was] = False
        self._resetting = ended & ~was
        return StepBatch(np.array(obs, copy=True), reward, terminated, truncated)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._env.close()
