"""Batched inference: actions for a whole batch of env copies from one forward of the model.

:class:`InferenceModel` is what actors' actions come from. In parallel modes it holds its own
copy of the learner's model, refreshed by :meth:`InferenceModel.publish` after each update with
the learner's version number, so the learner can step its optimiser while inference runs; every
action is stamped with the version that chose it. In serial mode it wraps the learner's model
itself (``shared=True``): nothing runs concurrently, and publishing is free.

A recurrent model (``learner.model.core``) acts through :meth:`InferenceModel.act_recurrent`,
which takes the env copies' core states and returns the next ones; who keeps the states
between steps is :class:`mtrl.actors.core_states.CoreStates`. :meth:`InferenceModel.act`
serves feed-forward models only.
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
from mtrl.learner.recurrent import reset_state


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

    @property
    def state_size(self) -> int:
        """Floats of recurrent state per env copy (0: a feed-forward model)."""
        return int(getattr(self.model, "state_size", 0))

    @torch.inference_mode()
    def act(self, task: int, obs: Any) -> tuple[np.ndarray, np.ndarray, int]:
        """Raw actions and behaviour log-probs for a batch of observations of ``task``
        (sampled, or the mode when ``greedy``) and the version of the weights used."""
        if self.state_size:
            raise ValueError(
                "the model has a recurrent core: act with act_recurrent(task, obs, state), "
                "keeping each env copy's state between steps (mtrl.actors.core_states)"
            )
        with self._lock:
            # The policy only: V-trace recomputes values in the learner.
            x = obs_to_tensor(obs, self.device)
            model = self.model
            dist = model.policy(task, model.embed(task, x), model.action_mask(task, x))
            raw = dist.mode() if self.greedy else dist.sample()
            logp = dist.log_prob(raw)
            version = self.version
        return raw.cpu().numpy(), logp.float().cpu().numpy(), version

    @torch.inference_mode()
    def act_recurrent(
        self, task: int, obs: Any, state: torch.Tensor
    ) -> tuple[np.ndarray, np.ndarray, int, torch.Tensor]:
        """:meth:`act` for a recurrent model: acts from the copies' core states ``state [N, S]``
        (on :attr:`device`) and also returns their next states (the caller zeroes those of
        copies whose next row starts an episode)."""
        with self._lock:
            x = obs_to_tensor(obs, self.device)
            model = self.model
            h, nxt = model.step(task, x, state)
            dist = model.policy(task, h, model.action_mask(task, x))
            raw = dist.mode() if self.greedy else dist.sample()
            logp = dist.log_prob(raw)
            version = self.version
        return raw.cpu().numpy(), logp.float().cpu().numpy(), version, nxt


def make_policy(
    model: torch.nn.Module, action_spaces: Sequence[gym.Space], greedy: bool = False
) -> Any:
    """``policy(task, obs, valid) -> (raw, env_actions, logp)`` over ``model`` (evaluation).

    ``valid [N]`` is false for copies on a reset step (the batch-env rule): a recurrent
    model's per-copy states, kept here per task from zeros (fresh envs), are zeroed after it.
    """
    inference = InferenceModel(model, shared=True, greedy=greedy)
    states: dict[int, torch.Tensor] = {}

    def policy(task: int, obs: Any, valid: np.ndarray) -> tuple[np.ndarray, Any, np.ndarray]:
        if not inference.state_size:
            raw, logp, _ = inference.act(task, obs)
            return raw, env_actions(action_spaces[task], raw), logp
        n = len(valid)
        state = states.get(task)
        if state is None:
            state = model.initial_state(n, inference.device)
        raw, logp, _, nxt = inference.act_recurrent(task, obs, state)
        states[task] = reset_state(nxt, torch.as_tensor(~valid, device=inference.device))
        return raw, env_actions(action_spaces[task], raw), logp

    return policy
