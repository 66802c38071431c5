"""SAC's gradient step task by task: each task's encoders and heads on its own rows.

The step every mix of spaces can take (``Dict`` and ``Tuple`` observations, per-task step
sizes, tasks of different shapes): the batch is drawn across the ready tasks and grouped by
action kind (:func:`~mtrl.algorithms.sac.batch.draw_groups`), each task's encoders and heads
run on that task's rows, the shared torsos once over every row. Where tasks of one shape can
share batched calls, :mod:`mtrl.algorithms.sac.stacked_step` takes the same math in a few large
calls instead (``tests/algorithms/test_sac_stacked_step.py`` compares the two, values and
gradients).

One step: the soft targets from the target critics at the next observations; the critics'
step at the stored actions (with FAMO, the tasks' critic losses weighted); the policy's step
through the frozen critics; each task's temperature towards its target entropy from its mean
entropy in this batch; the target critics' Polyak average; the diagnostics; with prioritized
replay, the rows' |TD| back to their replays (:mod:`mtrl.algorithms.sac.losses` has the math).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from mtrl.algorithms.sac import losses
from mtrl.algorithms.sac.batch import Group
from mtrl.algorithms.sac.networks import CriticInput, squashed_params_many
from mtrl.learner.distributions import DiagGaussian
from mtrl.learner.model import Obs

__all__ = ["PerTaskSac"]

SacLearner = Any
"""A :class:`~mtrl.algorithms.sac.learner.SacLearner` (which imports this module)."""


def _requires_grad(params: Sequence[torch.Tensor], flag: bool) -> None:
    for p in params:
        p.requires_grad_(flag)


class PerTaskSac:
    """The per-task gradient step of one :class:`~mtrl.algorithms.sac.learner.SacLearner`.

    The batch comes from the learner's ``_sample`` and the reparameterisation's noise from
    its ``_noise_like``, the optimiser steps go through its ``_step`` and the per-task sums
    through its ``_task_sums``: the hooks a data-parallel learner (and a test that fixes the
    rows) overrides.
    """

    def __init__(self, learner: SacLearner) -> None:
        self.learner = learner

    def gradient_step(self, ready: Sequence[int]) -> torch.Tensor:
        """One critic, policy and temperature step on a fresh mixed batch; returns the three
        losses (float64 ``[3]``, on the device)."""
        lr = self.learner
        groups = lr._sample(ready)
        alpha = lr.alpha
        # Soft targets from the target critics at the next observations.
        with torch.no_grad():
            nxt = [self._act(g, g.next_obs) for g in groups]
            tq1, tq2 = self._q(lr.target, groups, "next_obs", [n[0] for n in nxt])
            targets = []
            for g, (_, _, aux), q1, q2 in zip(groups, nxt, tq1, tq2, strict=True):
                a = alpha[g.rows]
                if g.box:
                    v = losses.continuous_next_value(q1, q2, aux, a)
                else:
                    v = losses.discrete_next_value(q1, q2, aux, a)
                targets.append(losses.soft_target(g.rewards, g.terminated, lr.cfg.gamma, v))
        # Critics, at the stored actions.
        stored = [torch.tanh(g.actions) if g.box else None for g in groups]
        y = torch.cat(targets)
        weights = torch.cat([g.weights for g in groups])
        rows = torch.cat([g.rows for g in groups])
        k = len(lr.task_names)
        local = torch.zeros(k, device=lr.device).index_add_(0, rows, torch.ones_like(y))

        def critic_rows() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            """Both critics' ``Q`` of the stored actions and the critic loss per row."""
            q1s, q2s = self._q(lr.critic, groups, "obs", stored, raw=True)
            o1 = torch.cat([self._taken(g, q) for g, q in zip(groups, q1s, strict=True)])
            o2 = torch.cat([self._taken(g, q) for g, q in zip(groups, q2s, strict=True)])
            out = lr.critic_out
            return out.value(o1), out.value(o2), out.loss(o1, o2, y, weights)

        q1, q2, per_row = critic_rows()
        critic_loss = per_row.mean()
        if lr.famo is None:
            lr._step(lr.critic_opt, critic_loss, lr.critic_params, self._by_task(per_row, rows))
        else:
            scales = lr.famo.row_scales(local, self._task_totals(per_row, rows))
            lr._step(lr.critic_opt, (per_row * scales[rows]).sum(), lr.critic_params)
            with torch.no_grad():
                lr.famo.update(self._task_totals(critic_rows()[2], rows))
        td = (0.5 * ((q1 - y).abs() + (q2 - y).abs())).detach()
        # Policy, through frozen critics.
        _requires_grad(lr.critic_params, False)
        now = [self._act(g, g.obs) for g in groups]
        pq1, pq2 = self._q(lr.critic, groups, "obs", [n[0] for n in now])
        _requires_grad(lr.critic_params, True)
        actor_terms = []
        for g, (_, _, aux), q1g, q2g in zip(groups, now, pq1, pq2, strict=True):
            loss = losses.continuous_actor_loss if g.box else losses.discrete_actor_loss
            actor_terms.append(loss(aux, q1g, q2g, alpha[g.rows]))
        per_row = torch.cat(actor_terms)
        actor_loss = per_row.mean()
        lr._step(lr.actor_opt, actor_loss, lr.actor_params, self._by_task(per_row, rows))
        # Temperatures: each task's own, from its mean entropy in this batch.
        entropy = torch.cat([n[1] for n in now]).detach()
        total_h = torch.zeros(k, device=lr.device).index_add_(0, rows, entropy)
        count, total_h = lr._task_sums(local, total_h)
        # Tasks absent from the batch add nothing (a mask, not boolean indexing: that would
        # wait for the GPU to say how many tasks are present).
        present = (count > 0).to(total_h.dtype)
        mean_h = total_h / count.clamp(min=1)
        alpha_loss = (
            losses.temperature_loss(lr.log_alpha, mean_h, lr.target_entropy) * present
        ).sum()
        # From whole-batch sums: the same loss, hence the same gradient, on every replica.
        lr._step(lr.alpha_opt, alpha_loss, [lr.log_alpha], reduce=False)
        with torch.no_grad():
            torch._foreach_lerp_(lr.target_params, lr.critic_params, lr.sac.tau)
        lr.diagnostics.record(rows, local, alpha, entropy, q1.detach(), td)
        if lr.cfg.replay.prioritized:
            at, errors = 0, td.cpu().numpy()
            for g in groups:
                for task, n, indices in zip(g.tasks, g.sizes, g.indices, strict=True):
                    lr.replays[task].update_priorities(indices, errors[at : at + n])
                    at += n
        return torch.stack([critic_loss, actor_loss, alpha_loss]).detach().double()

    def _act(
        self, g: Group, obs: Sequence[Obs]
    ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
        """The policy at ``obs`` for a group's rows: the critics' action input (a
        reparameterised squashed action ``[n, size]`` for Box tasks, None for Discrete), the
        entropy estimate ``[n]`` and what the losses need (the sample's log-density ``[n]``,
        or all log-probabilities ``[n, A]``)."""
        model = self.learner.model
        h = model.embed_many(g.tasks, obs).split(g.sizes)
        if g.box:
            mean, log_std = squashed_params_many([model.policy_heads[k] for k in g.tasks], h)
            u = mean + log_std.exp() * self.learner._noise_like(mean)
            raw_logp = DiagGaussian(mean, log_std, 1).log_prob(u)
            logp = losses.squashed_log_prob(raw_logp, u)  # of tanh(u), in [-1, 1]
            return torch.tanh(u), -logp, logp
        log_probs = torch.cat(
            [model.policy(k, hk).log_probs for k, hk in zip(g.tasks, h, strict=True)]
        )
        return None, losses.discrete_entropy(log_probs), log_probs

    def _q(
        self,
        critic: nn.Module,
        groups: Sequence[Group],
        obs: str,
        actions: Sequence[Any],
        raw: bool = False,
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Both critics' ``Q`` per group (``[n]`` for Box, ``[n, A]`` for Discrete) at the
        groups' ``obs`` (field name) and ``actions`` (per group, squashed, or None): one
        critic call for every task's rows. ``raw``: their outputs instead (a categorical
        critic's logits, ``[n, bins]`` and ``[n, A, bins]``)."""
        inputs = [
            CriticInput(k, o, a)
            for g, act in zip(groups, actions, strict=True)
            for k, o, a in zip(
                g.tasks,
                getattr(g, obs),
                act.split(g.sizes) if act is not None else [None] * len(g.tasks),
                strict=True,
            )
        ]
        q1s, q2s = critic(inputs)
        out1, out2, at = [], [], 0
        for g in groups:
            n = len(g.tasks)
            out1.append(torch.cat(q1s[at : at + n]))
            out2.append(torch.cat(q2s[at : at + n]))
            at += n
        if raw:
            return out1, out2
        value = self.learner.critic_out.value
        return [value(q) for q in out1], [value(q) for q in out2]

    @staticmethod
    def _taken(g: Group, q: torch.Tensor) -> torch.Tensor:
        """``Q`` (or a categorical critic's logits) of the stored actions: a Discrete group's
        rows gathered at their action (``[n, A, *out]`` to ``[n, *out]``)."""
        if g.box:
            return q
        index = g.actions.long().reshape(-1, 1, *([1] * (q.ndim - 2)))
        return q.gather(1, index.expand(-1, 1, *q.shape[2:])).squeeze(1)

    def _task_totals(self, per_row: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Each task's sum ``[K]`` of ``per_row`` (not differentiated; ``rows``: each row's
        task)."""
        lr = self.learner
        totals = torch.zeros(len(lr.task_names), device=lr.device, dtype=per_row.dtype)
        return totals.index_add_(0, rows, per_row.detach())

    def _by_task(self, per_row: torch.Tensor, rows: torch.Tensor) -> dict[int, torch.Tensor]:
        """Each present task's part of the mean of ``per_row`` (empty unless the tasks'
        gradients are combined: ``learner.multitask.gradients``)."""
        lr = self.learner
        if not lr.combining:
            return {}
        parts = torch.zeros(len(lr.task_names), device=lr.device, dtype=per_row.dtype)
        parts = parts.index_add(0, rows, per_row) / per_row.numel()
        return {int(k): parts[k] for k in rows.unique().tolist()}
