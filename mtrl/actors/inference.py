"""Batched inference: one forward of the task's policy for a whole batch of env copies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from mtrl.actors.runner import Policy
from mtrl.learner.distributions import env_actions
from mtrl.learner.model import obs_to_tensor


def make_policy(
    model: torch.nn.Module, action_spaces: Sequence[gym.Space], greedy: bool = False
) -> Policy:
    """A :data:`~mtrl.actors.runner.Policy` that samples (or takes the mode) from ``model``."""
    device = next(model.parameters()).device

    @torch.no_grad()
    def policy(task: int, obs: Any) -> tuple[np.ndarray, Any, np.ndarray]:
        dist, _ = model(task, obs_to_tensor(obs, device))
        raw = dist.mode() if greedy else dist.sample()
        logp = dist.log_prob(raw)
        return (
            raw.cpu().numpy(),
            env_actions(action_spaces[task], raw),
            logp.float().cpu().numpy(),
        )

    return policy
