"""Batched inference: actions for a whole batch of env copies from one forward of the model.

:class:`InferenceModel` is what actors' actions come from. In parallel modes it holds its own
copy of the learner's model, refreshed by :meth:`InferenceModel.publish` after each update with
the learner's version number, so the learner can step its optimiser while inference runs; every
action is stamped with the version that chose it. In serial mode it wraps the learner's model
itself (``shared=True``): nothing runs concurrently, and publishing is free.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from mtrl.learner.distributions import env_actions
from mtrl.learner.model import obs_to_tensor


class InferenceModel:
    """Versioned weights + ``act(task, obs) -> (raw_actions, logp, version)``."""

    def __init__(
        self, model: torch.nn.Module, *, shared: bool = False, greedy: bool = False
    ) -> None:
        self.shared = shared
        self.greedy = greedy
        if shared:
            self.model = model
        else:
            self.model = copy.deepcopy(model).eval()
            self.model.requires_grad_(False)
        self.device = next(self.model.parameters()).device
        self.version = 0
        self._lock = threading.Lock()

    def publish(self, model: torch.nn.Module, version: int) -> None:
        """Copy ``model``'s parameters and buffers in and take its ``version``."""
        if not self.shared:
            with self._lock, torch.no_grad():
                for dst, src in zip(self.model.parameters(), model.parameters(), strict=True):
                    dst.copy_(src, non_blocking=True)
                for dst, src in zip(self.model.buffers(), model.buffers(), strict=True):
                    dst.copy_(src, non_blocking=True)
        self.version = version

    @torch.inference_mode()
    def act(self, task: int, obs: Any) -> tuple[np.ndarray, np.ndarray, int]:
        """Raw actions and behaviour log-probs for a batch of observations of ``task``
        (sampled, or the mode when ``greedy``) and the version of the weights used."""
        with self._lock:
            # The policy only: V-trace recomputes values in the learner.
            x = obs_to_tensor(obs, self.device)
            model = self.model
            dist = model.policy(task, model.embed(task, x), model.action_mask(task, x))
            raw = dist.mode() if self.greedy else dist.sample()
            logp = dist.log_prob(raw)
            version = self.version
        return raw.cpu().numpy(), logp.float().cpu().numpy(), version


def make_policy(
    model: torch.nn.Module, action_spaces: Sequence[gym.Space], greedy: bool = False
) -> Any:
    """``policy(task, obs) -> (raw, env_actions, logp)`` over ``model`` (evaluation, scripts)."""
    inference = InferenceModel(model, shared=True, greedy=greedy)

    def policy(task: int, obs: Any) -> tuple[np.ndarray, Any, np.ndarray]:
        raw, logp, _ = inference.act(task, obs)
        return raw, env_actions(action_spaces[task], raw), logp

    return policy
