"""SAC's networks: the squashed-Gaussian policy head the actors act with, and the twin
multi-task critics.

**Policy.** The actors act through :class:`~mtrl.learner.model.MultiTaskModel` unchanged
(``model.policy(task, model.embed(task, obs))`` → sample → :func:`~mtrl.learner.distributions.
env_actions`), so SAC keeps that model and swaps only the policy head of each ``Box`` task for
:class:`SquashedGaussianHead`: a mean *and a state-dependent log-std* from the features (SAC's
policy; the shared head's log-std is one learned constant). Its distribution is the same
:class:`~mtrl.learner.distributions.DiagGaussian` over the raw action ``u``, and the env gets
``low + (tanh(u) + 1) / 2 · (high − low)`` — exactly SAC's tanh squash rescaled to the
bounds, done by the actors' existing code. ``Discrete`` tasks keep the shared categorical head.

**Critics.** :class:`MultiTaskCritic` has its *own* per-task encoders and shared torso, built
from the same :class:`~mtrl.config.learner.ModelConfig` (a task-conditioned
``torso_mixture`` too, as soft modularization conditions its Q network), rather than sharing
the policy's.
Sharing would let the critic's TD gradients and the policy's gradients pull one encoder in two
directions at two step sizes (SAC-AE, Yarats et al. 2021, found the policy's gradient through
a shared encoder hurts and detaches it); separate networks are SAC's own arrangement and the
simplest that is robust across observation kinds, at twice the encoder cost. A ``Box`` task's
critic reads the squashed action ``tanh(u)`` (in ``[-1, 1]`` whatever the env's bounds):
with ``learner.sac.critic_action: input`` (the default) concatenated to a vector observation
before the critic encoder's first layer (:class:`~mtrl.learner.encoders.VectorWithExtra`, SAC's
own critic), otherwise added to the encoded observation through a per-task linear map before
the shared torso (:class:`ActionJoin`); its head gives one ``Q``. A ``Discrete(n)`` task's
head gives ``Q`` of all ``n`` actions (SAC-discrete), so its torso input is the encoded
observation alone. The twin critics are two such networks (:class:`TwinCritic`), each with its
own Polyak-averaged target copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from mtrl.config.learner import ModelConfig
from mtrl.learner import stacked
from mtrl.learner.distributions import LOG_STD_MAX, LOG_STD_MIN, DiagGaussian
from mtrl.learner.encoders import (
    VectorWithExtra,
    activation,
    make_encoder,
    ortho_init,
    takes_extra_input,
)
from mtrl.learner.model import MultiTaskModel, Obs
from mtrl.learner.torsos import make_torso, row_tasks, shared_torso_parameters

__all__ = [
    "ActionJoin",
    "CriticInput",
    "MultiTaskCritic",
    "SquashedGaussianHead",
    "TwinCritic",
    "install_policy_heads",
    "squash_log_std",
    "squashed_params_many",
]


class SquashedGaussianHead(nn.Module):
    """Features → mean and log-std of the raw action ``u`` (state-dependent, SAC's policy).

    The log-std is squashed smoothly into ``[LOG_STD_MIN, LOG_STD_MAX]`` (a tanh, as
    CleanRL's SAC does) so its gradient never dies at a hard clamp. ``log_half_width`` (NaN
    where a dim is unbounded) makes :meth:`DiagGaussian.entropy` the squashed action's.
    """

    supports_mask = False
    squashed = True

    def __init__(self, in_dim: int, space: spaces.Box) -> None:
        super().__init__()
        self.act_shape = tuple(int(d) for d in space.shape)
        size = int(np.prod(self.act_shape))
        self.mean = ortho_init(nn.Linear(in_dim, size), gain=0.01)
        self.log_std = ortho_init(nn.Linear(in_dim, size), gain=0.01)
        half = (np.asarray(space.high, np.float64) - np.asarray(space.low, np.float64)) / 2
        lhw = torch.as_tensor(np.log(np.broadcast_to(half, self.act_shape)), dtype=torch.float32)
        self.log_half_width: torch.Tensor
        self.register_buffer("log_half_width", lhw, persistent=False)

    def params(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and log-std of the raw action, flat: ``[*B, size]`` each (what a learner
        concatenating several tasks' rows works on)."""
        return self.mean(h), squash_log_std(self.log_std(h))

    def forward(self, h: torch.Tensor, action_mask: torch.Tensor | None = None) -> DiagGaussian:
        if action_mask is not None:
            raise ValueError("an action_mask is meaningless for a Box action space")
        shape = (*h.shape[:-1], *self.act_shape)
        mean, log_std = self.params(h)
        return DiagGaussian(
            mean.reshape(shape), log_std.reshape(shape), len(self.act_shape), self.log_half_width
        )


def squash_log_std(raw: torch.Tensor) -> torch.Tensor:
    """A log-std layer's output squashed smoothly into ``[LOG_STD_MIN, LOG_STD_MAX]``."""
    return LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(raw) + 1)


def squashed_params_many(
    heads: Sequence[SquashedGaussianHead], hs: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Several tasks' :meth:`SquashedGaussianHead.params`, rows concatenated in order:
    ``[Σn, size]`` means and log-stds (heads of one shape in one batched call each)."""
    means = stacked.apply_many([h.mean for h in heads], hs)
    raws = stacked.apply_many([h.log_std for h in heads], hs)
    return torch.cat(means), squash_log_std(torch.cat(raws))


def install_policy_heads(model: MultiTaskModel) -> None:
    """Give every ``Box`` task of ``model`` a :class:`SquashedGaussianHead` (in place)."""
    for k, task in enumerate(model.spaces):
        if isinstance(task.action_space, spaces.Box):
            model.policy_heads[k] = SquashedGaussianHead(model.hidden_dim, task.action_space)


class ActionJoin(nn.Module):
    """A ``Box`` task's action into its critic after the encoder: ``act(x + W a)``, the
    encoded observation ``x`` ``[n, dim]`` plus a linear map of the squashed action ``a``
    ``[n, size]``, through the activation (DDPG's critic, Lillicrap et al. 2016). Used with
    ``critic_action: hidden``, and for observations :class:`~mtrl.learner.encoders.
    VectorWithExtra` cannot take (images, text, Dict, Tuple), whose encoders are their own."""

    def __init__(self, size: int, dim: int, act: str) -> None:
        super().__init__()
        self.action = ortho_init(nn.Linear(size, dim, bias=False))
        self.activation = activation(act)

    def forward(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return self.activation(x + self.action(a))


@dataclass
class CriticInput:
    """One task's part of a critic batch: observations ``[n, *obs]`` and, for a ``Box`` task,
    squashed actions ``[n, *act]`` in ``[-1, 1]`` (None for a ``Discrete`` task)."""

    task: int
    obs: Obs
    action: torch.Tensor | None = None


class MultiTaskCritic(nn.Module):
    """``Q`` of every task: per-task encoder (+ action join) → shared torso → per-task head.

    :meth:`forward` takes several tasks' inputs and runs the torso once over all of them;
    a ``Box`` task's output is ``[n]``, a ``Discrete(n_a)`` task's ``[n, n_a]`` — or, for the
    categorical critic, logits over its ``bins`` values: ``[n, bins]``, ``[n, n_a, bins]``.
    """

    def __init__(
        self,
        action_spaces: Sequence[spaces.Space],
        obs_spaces: Sequence,
        cfg: ModelConfig,
        action_at: str = "input",
        bins: int | None = None,
    ):
        """``action_at``: ``learner.sac.critic_action`` (``input`` or ``hidden``); ``bins``:
        the categorical critic's outputs per action (``learner.sac.critic: categorical``;
        None: one ``Q``)."""
        super().__init__()
        self.bins = bins
        per = bins or 1
        dim = cfg.encoder_dim
        width = cfg.torso[-1] if cfg.torso else dim
        encoders, joins, heads = [], [], []
        self.continuous: list[bool] = []
        self.action_at_input: list[bool] = []
        for k, (obs_space, act_space) in enumerate(zip(obs_spaces, action_spaces, strict=True)):
            what = f"task {k} critic encoder"
            box = isinstance(act_space, spaces.Box)
            at_input = box and action_at == "input" and takes_extra_input(obs_space)
            self.continuous.append(box)
            self.action_at_input.append(at_input)
            size = int(np.prod(act_space.shape)) if box else 0
            if at_input:
                encoders.append(VectorWithExtra(obs_space, size, cfg, what))
            else:
                encoders.append(make_encoder(obs_space, cfg, what))
            if box:
                joins.append(nn.Identity() if at_input else ActionJoin(size, dim, cfg.activation))
                heads.append(ortho_init(nn.Linear(width, per), gain=1.0))
            else:
                joins.append(nn.Identity())
                heads.append(ortho_init(nn.Linear(width, int(act_space.n) * per), gain=1.0))
        self.encoders = nn.ModuleList(encoders)
        self.joins = nn.ModuleList(joins)
        self.torso = make_torso(cfg, len(encoders))
        self.conditioned = cfg.torso_mixture is not None
        """Whether the torso takes each row's task (``learner.model.torso_mixture``)."""
        self.heads = nn.ModuleList(heads)

    def shared_parameters(self) -> list[nn.Parameter]:
        """The torso's parameters that every task's loss reaches (not a conditioned torso's
        task embedding): what ``learner.multitask.gradients`` combines."""
        return shared_torso_parameters(self.torso)

    def forward(self, inputs: Sequence[CriticInput]) -> list[torch.Tensor]:
        encoded = stacked.encode_many(
            [self.encoders[p.task] for p in inputs],
            [(p.obs, p.action) if self.action_at_input[p.task] else (p.obs,) for p in inputs],
        )
        xs = []
        for part, x in zip(inputs, encoded, strict=True):
            k = part.task
            if self.continuous[k] and not self.action_at_input[k]:
                x = self.joins[k](x, part.action.reshape(x.shape[0], -1).to(x.dtype))
            xs.append(x)
        rows = [x.shape[0] for x in xs]
        joined = torch.cat(xs)
        if self.conditioned:
            h = self.torso(joined, row_tasks([p.task for p in inputs], rows, joined.device))
        else:
            h = self.torso(joined)
        h = h.split(rows)
        qs = stacked.apply_many([self.heads[p.task] for p in inputs], h)
        if self.bins is not None:  # logits: [n, bins] (Box), [n, n_a, bins] (Discrete)
            return [
                q if self.continuous[p.task] else q.reshape(q.shape[0], -1, self.bins)
                for p, q in zip(inputs, qs, strict=True)
            ]
        return [
            q.squeeze(-1) if self.continuous[p.task] else q for p, q in zip(inputs, qs, strict=True)
        ]


class TwinCritic(nn.Module):
    """Two independent :class:`MultiTaskCritic` networks (clipped double-Q, Fujimoto et al.
    2018): :meth:`forward` returns both critics' outputs per task."""

    def __init__(
        self,
        model: MultiTaskModel,
        cfg: ModelConfig,
        action_at: str = "input",
        bins: int | None = None,
    ) -> None:
        super().__init__()
        obs = [t.observation_space for t in model.spaces]
        act = [t.action_space for t in model.spaces]
        self.q1 = MultiTaskCritic(act, obs, cfg, action_at, bins)
        self.q2 = MultiTaskCritic(act, obs, cfg, action_at, bins)

    def forward(
        self, inputs: Sequence[CriticInput]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        return self.q1(inputs), self.q2(inputs)
