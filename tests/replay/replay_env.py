"""A batch env whose observations say where they come from, and unrolls collected from it by
the real actor loop (:class:`mtrl.actors.runner.SerialActor`), for the replay tests.

Observation of copy ``i``: ``[i, episode, step, last action]``. Episode ``k`` of copy ``i``
lasts ``2 + (i + k) % 4`` steps and ends *terminated* when ``i + k`` is even, *truncated*
otherwise. The reward of a step is ``1000 i + 10 episode + step`` read before the step. The env
follows the batch-env contract's next-step auto-reset: after an episode end the next step
ignores its action and returns the first observation ``[i, k + 1, 0, -1]`` with reward 0 and
both flags false.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from mtrl.actors.runner import SerialActor
from mtrl.actors.unroll import UnrollBuffer
from mtrl.plugins import BatchEnv
from mtrl.plugins.batch_env import StepBatch

NUM_ACTIONS = 3


def episode_length(copy: int | np.ndarray, episode: int | np.ndarray) -> int | np.ndarray:
    return 2 + (copy + episode) % 4


def ends_terminated(copy: int | np.ndarray, episode: int | np.ndarray) -> bool | np.ndarray:
    return (copy + episode) % 2 == 0


class CounterEnv(BatchEnv):
    """See the module docstring."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.single_observation_space = spaces.Box(-1e9, 1e9, (4,), np.float32)
        self.single_action_space = spaces.Discrete(NUM_ACTIONS)
        self.copy = np.arange(num_envs)
        self.episode = np.zeros(num_envs, np.int64)
        self.step_in = np.zeros(num_envs, np.int64)
        self.last_action = np.full(num_envs, -1, np.int64)
        self.pending_reset = np.zeros(num_envs, bool)

    def _obs(self) -> np.ndarray:
        rows = (self.copy, self.episode, self.step_in, self.last_action)
        return np.stack(rows, axis=1).astype(np.float32)

    def reset(self) -> np.ndarray:
        return self._obs()

    def step(self, actions: np.ndarray) -> StepBatch:
        reset = self.pending_reset.copy()
        reward = np.where(reset, 0, 1000 * self.copy + 10 * self.episode + self.step_in)
        self.episode += reset
        self.step_in = np.where(reset, 0, self.step_in + 1)
        self.last_action = np.where(reset, -1, np.asarray(actions, np.int64))
        done = ~reset & (self.step_in == episode_length(self.copy, self.episode))
        term = done & ends_terminated(self.copy, self.episode)
        self.pending_reset = done
        return StepBatch(self._obs(), reward.astype(np.float32), term, done & ~term)


class DictCounterEnv(CounterEnv):
    """The same observations as a nested Dict: ``{"pos": [i, episode, step], "more": {"act":
    [last action]}}``."""

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs)
        box = spaces.Box(-1e9, 1e9, (3,), np.float32)
        act = spaces.Box(-1, NUM_ACTIONS, (1,), np.int16)
        self.single_observation_space = spaces.Dict({"pos": box, "more": spaces.Dict({"act": act})})

    def _obs(self) -> dict:  # type: ignore[override]
        flat = super()._obs()
        return {"pos": flat[:, :3], "more": {"act": flat[:, 3:].astype(np.int16)}}


def flat_obs(obs: np.ndarray | dict) -> np.ndarray:
    """A (Dict)CounterEnv observation batch ``[..., 4]`` as the flat float layout."""
    if isinstance(obs, dict):
        return np.concatenate([obs["pos"], obs["more"]["act"].astype(np.float32)], axis=-1)
    return obs


class Collector:
    """Unrolls of a counter env through the real actor loop; the act function picks actions
    from a counter, stamps ``versions`` with the unroll number and, for recurrent storage,
    writes each copy's core state ``[unroll number, copy]`` at step 0."""

    def __init__(
        self, num_envs: int, unroll_length: int, state_size: int = 0, dict_obs: bool = False
    ) -> None:
        env = (DictCounterEnv if dict_obs else CounterEnv)(num_envs)
        self.actor = SerialActor(0, env, unroll_length, 1.0, "counter", state_size)
        self.unrolls = 0
        self._actions = 0

    def _act(self, buf: UnrollBuffer, t: int) -> None:
        n = buf.num_envs
        buf.actions[t] = (self._actions + np.arange(n)) % NUM_ACTIONS
        self._actions += 1
        buf.behaviour_logp[t] = -0.5 * (t + 1)
        buf.versions[t] = self.unrolls
        if t == 0 and buf.core_state is not None:
            buf.core_state[:, 0] = self.unrolls
            buf.core_state[:, 1] = np.arange(n)

    def collect(self) -> UnrollBuffer:
        """The next unroll (a fresh buffer: the actor's free list is never refilled)."""
        buf = self.actor.collect(self._act)
        self.unrolls += 1
        return buf
