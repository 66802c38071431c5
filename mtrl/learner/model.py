"""The multi-task actor-critic: per-task encoders → shared torso → per-task heads.

Task ``i`` owns an encoder chosen from its observation space (:mod:`mtrl.learner.encoders`),
a policy head chosen from its action space (:mod:`mtrl.learner.distributions`) and row ``i``
of the stacked value head (``value_weight [K, H]``, ``value_bias [K]``), whose output is the
PopArt-*normalised* value (Hessel et al. 2019); :func:`mtrl.learner.popart.preserve_outputs`
rescales those two parameters in place of a per-task ``nn.Linear``. The torso is shared.

Observations go in as the env produced them, converted with :func:`obs_to_tensor`
(``torch.as_tensor``, no casting: ``uint8`` frames stay ``uint8`` until they reach the
device); a Dict observation is a ``dict`` of tensors with the same leading batch shape, whose
``action_mask`` entry (1 = legal), if the space has one, masks the policy; a Tuple observation
is a ``dict`` keyed ``"0"``, ``"1"``, ... (:func:`obs_to_tensor` converts a tuple). Which
spaces a model can be built for is checked up front by :mod:`mtrl.learner.trainable`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import torch
from gymnasium import spaces
from torch import nn

from mtrl.config.models import ModelConfig
from mtrl.learner.distributions import GaussianHead, PolicyDist, make_policy_head
from mtrl.learner.encoders import ACTION_MASK_KEY, make_encoder, make_mlp

__all__ = ["MultiTaskModel", "TaskSpaces", "obs_to_tensor"]

Obs = torch.Tensor | dict[str, Any]


@dataclass(frozen=True)
class TaskSpaces:
    """The spaces of one task, for ONE env copy (no batch dimension)."""

    observation_space: gym.Space
    action_space: gym.Space


def obs_to_tensor(obs: Any, device: torch.device | str | None = None) -> Obs:
    """Batched numpy observations (array, dict or tuple of arrays) → tensors on ``device``.

    Keeps the dtype (``torch.as_tensor``), so casting and scaling happen on the device. A tuple
    (a Tuple observation) becomes a dict keyed ``"0"``, ``"1"``, ..., the form unrolls carry.
    """
    if isinstance(obs, Mapping):
        return {k: obs_to_tensor(v, device) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return {str(i): obs_to_tensor(v, device) for i, v in enumerate(obs)}
    return torch.as_tensor(obs, device=device)


class MultiTaskModel(nn.Module):
    """One network for K heterogeneous tasks; ``forward(task, obs)`` runs task ``task``'s path.

    Shapes: ``obs`` is ``[*B, *obs_shape]`` (or a dict of such) for any leading batch shape
    ``[*B]``, e.g. ``[N]`` at inference or ``[T + 1, N]`` in the learner. ``forward`` returns the
    policy with batch shape ``[*B]`` and the normalised value ``[*B]``.
    """

    def __init__(self, tasks: Sequence[TaskSpaces], cfg: ModelConfig) -> None:
        super().__init__()
        if len(tasks) == 0:
            raise ValueError("MultiTaskModel needs at least one task")
        self.num_tasks = len(tasks)
        self.hidden_dim = cfg.torso[-1] if cfg.torso else cfg.encoder_dim
        encoders, heads, masked = [], [], []
        for i, task in enumerate(tasks):
            what = f"task {i}"
            encoders.append(make_encoder(task.observation_space, cfg, f"{what} encoder"))
            head = make_policy_head(
                task.action_space,
                self.hidden_dim,
                f"{what} policy head",
                cfg.squashed_entropy,
                cfg.log_std_step_scale,
            )
            has_mask = (
                isinstance(task.observation_space, spaces.Dict)
                and ACTION_MASK_KEY in task.observation_space.spaces
            )
            if has_mask and not head.supports_mask:
                raise ValueError(
                    f"{what}: the observation has an {ACTION_MASK_KEY!r} but the action space "
                    f"{task.action_space!r} is not discrete; rename the key or drop it"
                )
            heads.append(head)
            masked.append(has_mask)
        self.encoders = nn.ModuleList(encoders)
        self.torso = make_mlp(cfg.encoder_dim, cfg.torso, cfg.activation)
        self.policy_heads = nn.ModuleList(heads)
        self._masked = tuple(masked)
        # Fixed at construction: a task-sharded replica replaces the heads it does not own.
        self.gaussian = tuple(isinstance(h, GaussianHead) for h in heads)
        """Per task: whether its policy is a Gaussian (``Box`` actions)."""
        self.value_weight = nn.Parameter(torch.empty(self.num_tasks, self.hidden_dim))
        self.value_bias = nn.Parameter(torch.zeros(self.num_tasks))
        with torch.no_grad():
            for row in self.value_weight:  # each row as its own Linear(H, 1), gain 1
                nn.init.orthogonal_(row.view(1, -1), gain=1.0)

    def _check_task(self, task: int) -> int:
        if not 0 <= task < self.num_tasks:
            raise IndexError(f"task {task} out of range: the model has {self.num_tasks} tasks")
        return int(task)

    def embed(self, task: int, obs: Obs) -> torch.Tensor:
        """Torso output ``h [*B, H]``; value = ``h @ value_weight[task] + value_bias[task]``."""
        task = self._check_task(task)
        return self.torso(self.encoders[task](obs))

    def value(self, task: int, h: torch.Tensor) -> torch.Tensor:
        """Normalised value ``[*B]`` of task ``task`` from torso features ``h [*B, H]``."""
        return h @ self.value_weight[task].to(h.dtype) + self.value_bias[task].to(h.dtype)

    def has_action_mask(self, task: int) -> bool:
        """Whether task ``task``'s Dict observation carries an ``action_mask``."""
        return self._masked[self._check_task(task)]

    def action_mask(self, task: int, obs: Obs) -> torch.Tensor | None:
        """The legal-action mask ``[*B, n]`` inside ``obs``, or None if the task has none."""
        return obs[ACTION_MASK_KEY] if self.has_action_mask(task) else None

    def policy(
        self, task: int, h: torch.Tensor, action_mask: torch.Tensor | None = None
    ) -> PolicyDist:
        """Task ``task``'s policy from torso features ``h [*B, H]`` (batch shape ``[*B]``).

        A task with an action mask needs it here, sliced like ``h`` (e.g.
        ``model.action_mask(k, obs)[:-1]`` for ``h[:-1]``); without it the log-probs would
        not match the behaviour policy's.
        """
        if action_mask is None and self.has_action_mask(task):
            raise ValueError(
                f"task {task} has an {ACTION_MASK_KEY!r} in its observation: pass it to "
                "policy(task, h, action_mask) sliced like h"
            )
        return self.policy_heads[task](h, action_mask)

    def forward(self, task: int, obs: Obs) -> tuple[PolicyDist, torch.Tensor]:
        """Policy (batch shape ``[*B]``) and PopArt-normalised value ``[*B]`` of task ``task``."""
        h = self.embed(task, obs)
        return self.policy(task, h, self.action_mask(task, obs)), self.value(task, h)

    def task_parameters(self, task: int) -> list[nn.Parameter]:
        """Parameters only task ``task`` uses (its encoder and policy head; not the value rows)."""
        task = self._check_task(task)
        return [*self.encoders[task].parameters(), *self.policy_heads[task].parameters()]

    def extra_repr(self) -> str:
        return f"num_tasks={self.num_tasks}, hidden_dim={self.hidden_dim}"
