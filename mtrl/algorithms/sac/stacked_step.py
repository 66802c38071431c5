"""SAC's gradient step for tasks of one shape, in a few large calls.

A suite of tasks whose observations and actions have one shape (Meta-World's MT10: ten tasks of
39 floats and 4 actions; three variants of one simulation code) has per-task encoders and heads
of one shape. The per-task step (:meth:`SacLearner._gradient_step`) runs each of them on its
own rows: ten small matmuls per layer, forward and backward, for each of the step's five
network passes, three optimisers over a hundred tensors, and bookkeeping between them — on one
CPU core MT10's step was mostly dispatch, not arithmetic (docs/BENCHMARKS.md, "The learner at
the speed of its arithmetic"). Here instead:

* **the batch is one padded block** ``[K, m, ·]``: every task's rows in its own slice, padded to
  the largest task's count ``m`` with rows of weight 0, drawn from the replays exactly as the
  per-task step draws them (the same calls in the same order) and moved to the device in one
  copy;
* **every per-task layer is one batched call** (:class:`~mtrl.learner.stacked.LinearStack`):
  the tasks' weights live in one ``[K, out, in]`` tensor that the per-task modules alias, so the
  actors, checkpoints and state dicts see the same modules as before;
* **the twin critics are one ensemble**: both critics' encoders and heads in one ``[2K, ...]``
  stack, their plain torsos in one ``[2, ...]`` stack, so each layer of both critics is one call;
* **the optimisers step a handful of tensors** (one per layer and kind), fused;
* the policy's pass through the critics detaches their weights instead of switching each
  parameter's ``requires_grad`` off and on.

The math is the per-task step's, term by term (``tests/algorithms/test_sac_stacked_step.py``
compares one step of each, values and gradients, with prioritized replay, combined task
gradients, a task-conditioned torso and one task). :func:`why_not` says when a learner cannot
take this path (tasks of several shapes, per-task step sizes, image observations, ...); it
then keeps the per-task step. :data:`ENABLED` turns the path off, to compare
(``benchmarks/learner_update.py --stacked-step``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from mtrl.algorithms.sac import graphed, losses
from mtrl.algorithms.sac.graphed import GraphedStep
from mtrl.algorithms.sac.networks import SquashedGaussianHead, squash_log_std
from mtrl.learner.device import to_device
from mtrl.learner.stacked import LinearStack, MLPStack, stack_signature

SacLearner = Any
"""A :class:`~mtrl.algorithms.sac.learner.SacLearner` (which imports this module)."""

__all__ = ["ENABLED", "PaddedBatch", "StackedSac", "why_not"]

ENABLED = True
"""Take the stacked step wherever :func:`why_not` allows (False: always the per-task step)."""

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _unscaled_flat(prep: Any) -> bool:
    """Whether an encoder's input preparation only flattens (a float ``Box``: no scaling)."""
    return prep is not None and getattr(prep, "inv_high", "absent") is None


def why_not(learner: SacLearner, lr_scales: Sequence[float] | None) -> str | None:
    """Why ``learner`` cannot take the stacked step, or None where it can: every task a flat
    float ``Box`` observation of one shape and a ``Box`` action of one size, the critics reading
    the action at their input, one step size for every task."""
    model, critic = learner.model, learner.critic
    tasks = model.spaces
    if any(float(s) != 1.0 for s in lr_scales or ()):
        return "per-task learning-rate scales"
    if not all(isinstance(t.action_space, spaces.Box) for t in tasks):
        return "a Discrete task"
    if len({t.action_space.shape for t in tasks}) != 1:
        return "Box actions of several sizes"
    obs = [t.observation_space for t in tasks]
    if not all(isinstance(s, spaces.Box) and len(s.shape) != 3 for s in obs):
        return "an observation that is not a flat Box"
    if len({s.shape for s in obs}) != 1:
        return "observations of several shapes"
    encoders = list(model.encoders)
    if not all(_unscaled_flat(getattr(e, "prep", None)) and hasattr(e, "mlp") for e in encoders):
        return "an encoder that is not a float vector MLP"
    if not all(isinstance(h, SquashedGaussianHead) for h in model.policy_heads):
        return "a policy head that is not SAC's squashed Gaussian"
    for q in (critic.q1, critic.q2):
        if not all(q.action_at_input):
            return "critics that take the action after the encoder (critic_action: hidden)"
        if not all(_unscaled_flat(getattr(e, "scale", None)) for e in q.encoders):
            return "a critic encoder that is not a float vector MLP"
    mlps = [e.mlp for e in encoders] + [e.mlp for q in (critic.q1, critic.q2) for e in q.encoders]
    if (
        len({stack_signature(m) for m in mlps[: len(encoders)]}) != 1
        or len({stack_signature(m) for m in mlps[len(encoders) :]}) != 1
    ):
        return "encoders of several shapes"
    return None


@dataclass
class HostBatch:
    """One gradient step's transitions on the host: ``block [K, m, 2·obs + act + 4]`` (each
    task's rows first in its slice: observation, next observation, raw action, reward,
    terminated, importance weight, 1; then padding rows of zeros), the rows of each task
    ``count [K]`` and the replay items drawn per task (for the priorities)."""

    block: np.ndarray
    count: np.ndarray
    indices: dict[int, np.ndarray]


@dataclass
class PaddedBatch:
    """A :class:`HostBatch` on the learner's device, as views of its block: ``[K, m, ·]``
    fields, ``mask`` 1 on a sampled row and 0 on padding, where ``weights`` is 0 too."""

    obs: torch.Tensor  # [K, m, obs] float
    next_obs: torch.Tensor  # [K, m, obs]
    actions: torch.Tensor  # [K, m, act] raw (before the squash)
    rewards: torch.Tensor  # [K, m]
    terminated: torch.Tensor  # [K, m] float 0/1
    weights: torch.Tensor  # [K, m] importance weights, 0 on padding
    mask: torch.Tensor  # [K, m]
    count: torch.Tensor  # [K] rows of each task (float)

    @classmethod
    def of(cls, block: torch.Tensor, count: torch.Tensor, obs: int, act: int) -> PaddedBatch:
        """Views of a device ``block`` laid out as :class:`HostBatch` says."""
        return cls(
            obs=block[..., :obs],
            next_obs=block[..., obs : 2 * obs],
            actions=block[..., 2 * obs : 2 * obs + act],
            rewards=block[..., -4],
            terminated=block[..., -3],
            weights=block[..., -2],
            mask=block[..., -1],
            count=count,
        )


def _flat_params(modules: Sequence[nn.Module], aliased: set[int]) -> list[nn.Parameter]:
    """The parameters of ``modules`` that no stack aliases (those the stacks hold for them)."""
    return [p for m in modules for p in m.parameters() if id(p) not in aliased]


class _Critics:
    """Both critics of a :class:`~mtrl.algorithms.sac.networks.TwinCritic` as one ensemble:
    encoders and heads stacked over ``[2K]`` members (critic 1's tasks, then critic 2's), the
    torsos over ``[2]`` where they are plain MLPs."""

    def __init__(self, twin: nn.Module) -> None:
        q1, q2 = twin.q1, twin.q2
        self.num_tasks = len(q1.encoders)
        self.encoders = MLPStack([e.mlp for q in (q1, q2) for e in q.encoders])
        self.heads = LinearStack([[h] for q in (q1, q2) for h in q.heads])
        self.torsos: list[nn.Module] = [q1.torso, q2.torso]
        self.conditioned = q1.conditioned
        plain = not self.conditioned and stack_signature(q1.torso) is not None
        self.torso_stack = MLPStack(self.torsos) if plain else None
        stacks: list[nn.Module] = [self.encoders, self.heads]
        if self.torso_stack is not None:
            stacks.append(self.torso_stack)
        aliased = {id(p) for s in stacks for m in s.modules() for p in m.parameters()}
        aliased |= {id(p) for q in (q1, q2) for e in q.encoders for p in e.mlp.parameters()}
        aliased |= {id(p) for q in (q1, q2) for h in q.heads for p in h.parameters()}
        if self.torso_stack is not None:
            aliased |= {id(p) for t in self.torsos for p in t.parameters()}
        own = [p for s in stacks for p in s.parameters()]
        self.params = own + _flat_params([q1, q2], aliased | {id(p) for p in own})
        """What the critics' optimiser steps (and the target critics' Polyak average
        follows, in the same order)."""
        self.unstacked = [p for p in self.params if id(p) not in {id(q) for q in own}]
        """The critics' parameters outside the stacks (a conditioned torso's)."""
        self.shared = (
            list(self.torso_stack.parameters())
            if self.torso_stack is not None
            else [*q1.shared_parameters(), *q2.shared_parameters()]
        )
        """The parameters every task's loss reaches (what combined task gradients act on)."""

    def __call__(
        self, obs: torch.Tensor, action: torch.Tensor, rows: torch.Tensor | None, frozen: bool
    ) -> torch.Tensor:
        """Both critics' ``Q`` ``[2, K, m]`` at ``obs [K, m, o]`` and squashed ``action``
        ``[K, m, a]`` (``frozen``: no gradient reaches the critics' parameters)."""
        k, m = obs.shape[0], obs.shape[1]
        x = torch.cat([obs, action.to(obs.dtype)], dim=-1)
        h = self.encoders(x.repeat(2, 1, 1), frozen)  # [2K, m, e]
        if self.torso_stack is not None:
            h = self.torso_stack(h.reshape(2, k * m, -1), frozen)
        else:
            flat = h.reshape(2, k * m, -1)
            with _frozen(self.unstacked, frozen):
                outs = [
                    torso(flat[i], rows) if self.conditioned else torso(flat[i])
                    for i, torso in enumerate(self.torsos)
                ]
            h = torch.stack(outs)
        q = self.heads(h.reshape(2 * k, m, -1), frozen)
        return q.reshape(2, k, m)


class _frozen:
    """Within the block, ``params`` take no gradient (each put back as it was after)."""

    def __init__(self, params: Sequence[torch.Tensor], on: bool) -> None:
        self.params = list(params) if on else []
        self.was: list[bool] = []

    def __enter__(self) -> None:
        self.was = [p.requires_grad for p in self.params]
        for p in self.params:
            p.requires_grad_(False)

    def __exit__(self, *exc: object) -> None:
        for p, was in zip(self.params, self.was, strict=True):
            p.requires_grad_(was)


class StackedSac:
    """The stacked gradient step of one :class:`~mtrl.algorithms.sac.learner.SacLearner`
    (see the module docstring); built by :meth:`build` where :func:`why_not` allows."""

    def __init__(self, learner: SacLearner) -> None:
        model = learner.model
        self.learner = learner
        self.num_tasks = model.num_tasks
        self.act_size = int(np.prod(model.spaces[0].action_space.shape))
        self.obs_size = int(np.prod(model.spaces[0].observation_space.shape))
        self.encoders = MLPStack([e.mlp for e in model.encoders])
        self.heads = LinearStack([[h.mean, h.log_std] for h in model.policy_heads])
        self.critic = _Critics(learner.critic)
        self.target = _Critics(learner.target)
        for p in self.target.params:
            p.requires_grad_(False)
        value = {id(model.value_weight), id(model.value_bias)}  # SAC has no state value
        aliased = {id(p) for e in model.encoders for p in e.mlp.parameters()}
        aliased |= {id(p) for h in model.policy_heads for p in h.parameters()}
        own = [*self.encoders.parameters(), *self.heads.parameters()]
        self.actor_params = own + [
            p for p in model.parameters() if id(p) not in aliased | value and p.requires_grad
        ]
        self._rows: dict[int, torch.Tensor] = {}
        self.graphed = (
            GraphedStep(self.step_on_block, learner.device)
            if graphed.why_not(learner) is None
            else None
        )
        """The step as a replayed CUDA graph (:mod:`mtrl.algorithms.sac.graphed`), or None:
        eager."""

    @classmethod
    def build(cls, learner: SacLearner, lr_scales: Sequence[float] | None) -> StackedSac | None:
        """The stacked step for ``learner``, or None where it must keep the per-task step."""
        if not ENABLED or why_not(learner, lr_scales) is not None:
            return None
        return cls(learner)

    # -- the batch -------------------------------------------------------------------------------

    def draw(self, ready: Sequence[int], counts: Sequence[int], rows: int = 1) -> HostBatch:
        """``counts[i]`` transitions of task ``ready[i]``, drawn as the per-task step draws
        them, laid out ``[K, m, ·]`` on the host, ``m`` the largest count (at least ``rows``)."""
        lr = self.learner
        k, o, a = self.num_tasks, self.obs_size, self.act_size
        m = max(rows, int(max(counts)))
        block = np.zeros((k, m, 2 * o + a + 4), np.float32)
        count = np.zeros(k, np.float32)
        indices: dict[int, np.ndarray] = {}
        for task, n in zip(ready, counts, strict=True):
            if not n:
                continue
            tb, idx, weights = lr.replays[task].sample(int(n), lr.rng)
            part = block[task, :n]
            part[:, :o] = tb.obs.reshape(n, o)
            part[:, o : 2 * o] = tb.next_obs.reshape(n, o)
            part[:, 2 * o : 2 * o + a] = tb.actions.reshape(n, a)
            part[:, -4] = tb.rewards
            part[:, -3] = tb.terminated
            part[:, -2] = weights
            part[:, -1] = 1.0
            count[task] = n
            indices[task] = idx
        return HostBatch(block, count, indices)

    def on_device(self, host: HostBatch) -> PaddedBatch:
        """``host`` moved to the learner's device (one copy of the block, one of the counts)."""
        device = self.learner.device
        block, count = to_device(host.block, device), to_device(host.count, device)
        return PaddedBatch.of(block, count, self.obs_size, self.act_size)

    def _task_rows(self, m: int, device: torch.device) -> torch.Tensor:
        """Each row's task ``[K·m]`` for a task-conditioned torso (cached per ``m``)."""
        if m not in self._rows:
            self._rows[m] = torch.arange(self.num_tasks).repeat_interleave(m).to(device)
        return self._rows[m]

    # -- the networks ----------------------------------------------------------------------------

    def act(self, obs: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised raw action ``u [K, m, a]`` of the policy at ``obs`` and the
        log-density ``[K, m]`` of its squash ``tanh(u)``."""
        model = self.learner.model
        k, m = obs.shape[0], obs.shape[1]
        h = self.encoders(obs)
        h = model.run_torso(h.reshape(k * m, -1), rows).reshape(k, m, -1)
        out = self.heads(h)
        mean, raw = out.split(self.act_size, dim=-1)
        log_std = squash_log_std(raw)
        noise = self.learner._noise_like(mean)
        u = mean + log_std.exp() * noise
        raw_logp = (-0.5 * noise.square() - log_std).sum(-1) - self.act_size * _HALF_LOG_2PI
        return u, losses.squashed_log_prob(raw_logp, u)

    # -- one gradient step -----------------------------------------------------------------------

    def gradient_step(self, ready: Sequence[int]) -> torch.Tensor:
        """One critic, policy and temperature step on a fresh mixed batch (the per-task step's
        math); returns the three losses (float64 ``[3]``, on the device)."""
        lr = self.learner
        counts = lr.mix.split(lr.sac.batch_size, ready, lr.rng)
        if self.graphed is not None:
            host = self.draw(ready, counts, self.graphed.rows)
            return self.graphed.run(host)
        host = self.draw(ready, counts)
        losses_, td = self.step_on(self.on_device(host))
        if lr.sac.prioritized:
            errors = td.cpu().numpy()
            for task, idx in host.indices.items():
                lr.replays[task].update_priorities(idx, errors[task, : len(idx)])
        return losses_

    def step_on_block(
        self, block: torch.Tensor, count: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`step_on` the device ``block`` and ``count`` of a :class:`HostBatch`."""
        return self.step_on(PaddedBatch.of(block, count, self.obs_size, self.act_size))

    def step_on(self, b: PaddedBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """The step's device work on batch ``b``: the three losses (float64 ``[3]``) and each
        row's |TD| ``[K, m]``. No host synchronisation (a CUDA graph can capture it)."""
        lr, sac = self.learner, self.learner.sac
        n = float(sac.batch_size)  # the rows of every step (the counts' sum)
        m = b.obs.shape[1]
        rows = self._task_rows(m, b.obs.device)
        alpha_now = lr.alpha
        alpha = alpha_now.unsqueeze(1)  # [K, 1]
        # The policy at the next observations (for the targets) and at the observations (for
        # its own loss) in one pass: the critic step between them leaves the policy as it is.
        u_both, logp_both = self.act(
            torch.cat([b.next_obs, b.obs], dim=1), self._task_rows(2 * m, b.obs.device)
        )
        u_next, u = u_both.split(m, dim=1)
        logp_next, logp = logp_both.split(m, dim=1)
        with torch.no_grad():
            tq = self.target(b.next_obs, torch.tanh(u_next), rows, frozen=True)
            v = losses.continuous_next_value(tq[0], tq[1], logp_next, alpha)
            y = losses.soft_target(b.rewards, b.terminated, lr.cfg.gamma, v)
        q = self.critic(b.obs, torch.tanh(b.actions), rows, frozen=False)
        per_row = losses.critic_loss(q[0], q[1], y, b.weights)
        critic_loss = per_row.sum() / n
        lr._step(lr.critic_opt, critic_loss, self.critic.params, self._by_task(per_row, b, n))
        td = (0.5 * (q - y).abs().sum(0)).detach()
        pq = self.critic(b.obs, torch.tanh(u), rows, frozen=True)
        per_row = losses.continuous_actor_loss(logp, pq[0], pq[1], alpha) * b.mask
        actor_loss = per_row.sum() / n
        lr._step(lr.actor_opt, actor_loss, self.actor_params, self._by_task(per_row, b, n))
        entropy = -logp.detach()
        count, total_h = lr._task_sums(b.count, (entropy * b.mask).sum(1))
        present = (count > 0).to(total_h.dtype)
        mean_h = total_h / count.clamp(min=1)
        alpha_loss = (
            losses.temperature_loss(lr.log_alpha, mean_h, lr.target_entropy) * present
        ).sum()
        lr._step(lr.alpha_opt, alpha_loss, [lr.log_alpha], reduce=False)
        with torch.no_grad():
            torch._foreach_lerp_(self.target.params, self.critic.params, sac.tau)
        sums = torch.stack([entropy, q[0].detach(), td], dim=-1).mul_(b.mask.unsqueeze(-1))
        lr.diagnostics.add(b.count, alpha_now, sums.sum(1))
        return torch.stack([critic_loss, actor_loss, alpha_loss]).detach().double(), td

    def _by_task(
        self, per_row: torch.Tensor, b: PaddedBatch, n: float
    ) -> dict[int, torch.Tensor] | None:
        """Each present task's part of the batch's mean loss (only when the tasks' gradients
        are combined: ``learner.multitask.gradients``; reads the counts on the host)."""
        if not self.learner.combining:
            return None
        parts = per_row.sum(1) / n
        present = b.count.cpu().numpy() > 0
        return {task: parts[task] for task in np.flatnonzero(present).tolist()}
