"""A task runner: one batch env of one task, stepped with a policy into an unroll buffer.

This is the serial actor. Multi-process actors run the same loop in their own process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mtrl.actors.episodes import EpisodeTracker
from mtrl.actors.unroll import UnrollBuffer, obs_row
from mtrl.plugins import BatchEnv
from mtrl.plugins.spaces import write_item

#: ``policy(task, obs_batch) -> (raw_actions, env_actions, behaviour_logp)``
Policy = Callable[[int, Any], tuple[np.ndarray, Any, np.ndarray]]


class TaskRunner:
    """Steps ``env`` ``unroll_length`` times per :meth:`collect`, writing in place."""

    def __init__(self, task: int, env: BatchEnv, unroll_length: int, reward_scale: float) -> None:
        self.task = task
        self.env = env
        self.reward_scale = np.float32(reward_scale)
        self.buffer = UnrollBuffer.allocate(
            task, unroll_length, env.num_envs, env.single_observation_space, env.single_action_space
        )
        self.episodes = EpisodeTracker(env.num_envs)
        self.prev_done = np.zeros(env.num_envs, bool)
        self.env_steps = 0
        write_item(self.buffer.obs, 0, env.reset())

    def collect(self, policy: Policy, version: int) -> UnrollBuffer:
        """Fill one unroll and return a snapshot of it; the bootstrap obs carries over."""
        b = self.buffer
        b.policy_version = version
        for t in range(b.length):
            raw, env_actions, logp = policy(self.task, obs_row(b.obs, t))
            out = self.env.step(env_actions)
            valid = ~self.prev_done
            done = out.terminated | out.truncated
            b.actions[t] = raw
            b.behaviour_logp[t] = logp
            np.multiply(out.reward, self.reward_scale, out=b.rewards[t])
            b.terminated[t] = out.terminated
            b.truncated[t] = out.truncated
            b.valid[t] = valid
            write_item(b.obs, t + 1, out.obs)
            self.episodes.record(out.reward, done, valid)
            self.prev_done = done
        self.env_steps += b.length * b.num_envs
        snapshot = b.copy()
        write_item(b.obs, 0, obs_row(b.obs, b.length))
        return snapshot

    def close(self) -> None:
        self.env.close()
