"""CueRecall: a memory task that no feed-forward policy can solve (a T-maze without the maze).

Each episode shows a cue — one of two values — at its first step only, then ``delay`` blank
steps, then a query step at which the action must name the cue: reward +1 if it does, -1 if not
(0 at every other step), and the episode ends. A policy that sees only the current observation
reads the same blank query whatever the cue, so its expected return is 0; a policy with memory
scores 1. Observation ``[cue is 0, cue is 1, query]`` (float32), actions ``Discrete(2)``.

A :class:`~mtrl.plugins.builtin.tensor_envs.base.TensorBatchEnv`, so it runs in actors (numpy
API) and in Anakin (tensor API) alike. Physical state ``(u, t)``: the cue is ``u >= 0.5`` for
``u`` drawn uniformly at each reset, ``t`` counts the steps of the episode.
"""

from __future__ import annotations

from typing import Any

import torch

from mtrl.plugins.builtin.tensor_envs.base import TensorBatchEnv
from mtrl.plugins.builtin.tensor_envs.spaces import cue_recall_spaces

MAX_DELAY = 1000


class CueRecall(TensorBatchEnv):
    """Cue at step 0, ``delay`` blank steps, then the query: name the cue (+1) or not (-1).

    ``delay`` (env_kwargs, default 4): blank steps between cue and query; an episode lasts
    ``delay + 2`` steps. The other keyword arguments are :class:`TensorBatchEnv`'s; the time
    limit defaults to well past the episode, so episodes end by termination.
    """

    gym_id = "CueRecall-v0"
    default_max_episode_steps = MAX_DELAY + 10
    reset_low = (0.0, 0.0)
    reset_high = (1.0, 0.0)
    single_observation_space, single_action_space = cue_recall_spaces()

    def __init__(self, num_envs: int, seed: int = 0, *, delay: int = 4, **kwargs: Any) -> None:
        if not isinstance(delay, int) or not 0 <= delay <= MAX_DELAY:
            raise ValueError(
                f"CueRecall: delay must be an integer in [0, {MAX_DELAY}], got {delay!r}"
            )
        self.delay = delay
        super().__init__(num_envs, seed, **kwargs)

    def dynamics(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        u, t = state.unbind(-1)
        query = t >= self.delay + 1
        right = actions == (u >= 0.5).long()
        reward = torch.where(query, torch.where(right, 1.0, -1.0), 0.0).to(state.dtype)
        return torch.stack((u, t + 1), -1), reward, query

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        u, t = state.unbind(-1)
        first = t == 0
        cue = u >= 0.5
        return torch.stack((first & ~cue, first & cue, t == self.delay + 1), -1).float()

    def __repr__(self) -> str:
        return f"CueRecall(num_envs={self.num_envs}, delay={self.delay}, device={self.device})"
