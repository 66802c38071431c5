"""The PPO learner: the :class:`mtrl.learner.protocol.Learner` that ``learner.algorithm: ppo``
builds.

One :meth:`PpoLearner.update` on a batch of fresh unrolls (one :class:`TaskBatch` each, of any
tasks):

1. with the model as the actors had it: each unroll's unnormalised values ``σ_k n + μ_k``,
   then GAE(λ) advantages and λ-returns (:func:`mtrl_ppo.losses.gae`);
2. each task's PopArt statistics move toward its λ-returns and the value head is rescaled to
   preserve its outputs (:class:`mtrl_ppo.value_stats.TaskValueStats`); targets and the old
   values are normalised with the new statistics;
3. advantages standardised per task (or divided by each task's σ);
4. ``epochs`` passes over the batch's valid steps, each shuffled into ``minibatches``
   (:func:`mtrl_ppo.samples.minibatches`): one forward over the minibatch (every task's rows
   through its encoder, then one torso call), the clipped surrogate against the behaviour
   log-probabilities the unroll recorded, the value loss (clipped if asked), the entropy
   bonus, each step's rows weighted by its unroll's loss weight; one optimiser step with the
   gradient norm clipped to ``learner.max_grad_norm``;
5. the policy version goes up by one; the trainer publishes the model to the actors.

The ratio is against the recorded behaviour log-probabilities, so an unroll an actor collected
a version behind (process actors run ahead of the learner) is corrected like a later epoch's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from mtrl.config import LearnerConfig
from mtrl.errors import UserError
from mtrl.learner import schedule
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel
from mtrl.learner.optim import (
    load_optimizer_state,
    make_optimizer,
    optimizer_state,
    param_groups,
    set_learning_rate,
)
from mtrl_ppo import losses
from mtrl_ppo.samples import TaskSamples, from_batch, merge_by_task, minibatches
from mtrl_ppo.settings import PpoSettings
from mtrl_ppo.value_stats import TaskValueStats

__all__ = ["PpoLearner"]

#: Per-update sums the metrics are read from, in this order.
_SUMS = ("policy", "value", "entropy", "approx_kl", "clip_fraction", "rows")


class PpoLearner:
    """Owns the optimiser, each task's PopArt statistics and the policy version."""

    def __init__(
        self,
        model: MultiTaskModel,
        cfg: LearnerConfig,
        task_names: Sequence[str],
        settings: PpoSettings,
        lr_scales: Sequence[float] | None = None,
    ) -> None:
        if getattr(model, "recurrent", False):
            raise UserError(
                "learner.algorithm: ppo shuffles single steps and has no recurrent core yet: "
                "remove learner.model.core or choose learner.algorithm: impala"
            )
        self.model = model
        self.cfg = cfg
        self.settings = settings
        self.task_names = list(task_names)
        self.device = next(model.parameters()).device
        self.version = 0
        self.values = TaskValueStats(len(self.task_names), cfg.popart, self.device)
        self.optimizer = make_optimizer(param_groups(model, lr_scales), cfg)
        self._window = torch.zeros(len(self.task_names), 3, dtype=torch.float64)

    @property
    def local_tasks(self) -> list[int]:
        """Every task: one process takes every task's unrolls."""
        return list(range(len(self.task_names)))

    def set_progress(self, progress: float) -> None:
        """The step size for the run's progress (``learner.lr_schedule``)."""
        set_learning_rate(self.optimizer, schedule.learning_rate(self.cfg, progress))

    def update(self, batches: Sequence[TaskBatch]) -> dict[str, float]:
        """Epochs of clipped-surrogate steps on ``batches``; returns flat metrics."""
        if not batches:
            raise ValueError("PpoLearner.update needs at least one TaskBatch")
        self.model.train()
        parts = self._samples(batches)
        sums = torch.zeros(len(_SUMS), dtype=torch.float64)
        steps, grad_norm, stopped = 0, 0.0, False
        for _ in range(self.settings.epochs):
            for mb in minibatches(parts, self.settings.minibatches):
                step_sums, grad_norm = self._step(mb)
                sums += step_sums
                steps += 1
                kl = step_sums[_SUMS.index("approx_kl")] / step_sums[-1]
                target = self.settings.target_kl
                if target is not None and kl > 1.5 * target:
                    stopped = True
                    break
            if stopped:
                break
        self.version += 1
        return self._metrics(batches, sums, steps, grad_norm, stopped)

    @torch.no_grad()
    def _samples(self, batches: Sequence[TaskBatch]) -> list[TaskSamples]:
        """Steps 1–3 of the update: every batch's valid steps with their (normalised)
        advantages, normalised λ-returns and old normalised values, one part per task."""
        s, model = self.settings, self.model
        mu, sigma = self.values.stats()
        values, gaes = [], []
        for b in batches:
            k = b.task
            v = model.value(k, model.embed(k, b.obs)).float() * sigma[k] + mu[k]
            values.append(v)
            gaes.append(
                losses.gae(
                    b.rewards.float(),
                    v[:-1],
                    v[-1],
                    b.terminated,
                    b.truncated,
                    self.cfg.gamma,
                    s.gae_lambda,
                )
            )
        self.values.update(
            model, [b.task for b in batches], [g.returns for g in gaes], [b.valid for b in batches]
        )
        mu, sigma = self.values.stats()
        flat = []
        for b, v, g in zip(batches, values, gaes, strict=True):
            k = b.task
            adv = g.advantages if s.normalize_advantages else g.advantages / sigma[k]
            targets = (g.returns - mu[k]) / sigma[k]
            old = (v[:-1] - mu[k]) / sigma[k]
            flat.append(from_batch(b, adv, targets, old))
        parts = merge_by_task(flat)
        if s.normalize_advantages:
            adv = torch.cat([p.advantages for p in parts])
            ids = torch.cat([torch.full((len(p),), p.task, device=adv.device) for p in parts])
            normed = losses.normalize_per_task(adv, ids, len(self.task_names))
            sizes = [len(p) for p in parts]
            parts = [
                replace(p, advantages=a) for p, a in zip(parts, normed.split(sizes), strict=True)
            ]
        return parts

    def _step(self, mb: list[TaskSamples]) -> tuple[torch.Tensor, float]:
        """One gradient step on a minibatch; its sums (:data:`_SUMS`) and the gradient norm."""
        s, model = self.settings, self.model
        rows = sum(len(p) for p in mb)
        h_all = model.embed_many([p.task for p in mb], [p.obs for p in mb])
        total = torch.zeros((), device=self.device)
        sums = torch.zeros(len(_SUMS), dtype=torch.float64)
        for p, h in zip(mb, h_all.split([len(p) for p in mb]), strict=True):
            k = p.task
            dist = model.policy(k, h, model.action_mask(k, p.obs))
            logp = dist.log_prob(p.actions)
            entropy = dist.entropy()
            pg = losses.clipped_surrogate(logp, p.behaviour_logp, p.advantages, s.clip)
            v = losses.value_loss(model.value(k, h), p.targets, p.old_values, s.value_clip)
            w = p.weights
            total = total + (w * (pg + self.cfg.value_coef * v - s.entropy_cost * entropy)).sum()
            n = len(p)
            kl = losses.approx_kl(logp.detach(), p.behaviour_logp)
            clipped = losses.clip_fraction(logp.detach(), p.behaviour_logp, s.clip)
            part = (
                torch.stack([pg.sum(), v.sum(), entropy.sum(), kl * n, clipped * n])
                .detach()
                .double()
                .cpu()
            )
            sums[:5] += part
            sums[5] += n
            self._window[k] += torch.tensor([n, float(part[2]), float(part[4])])
        self.optimizer.zero_grad(set_to_none=True)
        (total / max(rows, 1)).backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()
        return sums, float(norm)

    def _metrics(
        self,
        batches: Sequence[TaskBatch],
        sums: torch.Tensor,
        steps: int,
        grad_norm: float,
        stopped: bool,
    ) -> dict[str, float]:
        """Means over every minibatch row of the update, policy lag, PopArt statistics."""
        n = max(float(sums[-1]), 1.0)
        samples = sum(b.num_samples for b in batches)
        old = self.version - 1
        lag = sum((old - b.policy_version) * b.num_samples for b in batches)
        pg, v, ent, kl, clipped = (float(x) / n for x in sums[:5])
        metrics = {
            "losses/total": pg + self.cfg.value_coef * v - self.settings.entropy_cost * ent,
            "losses/policy": pg,
            "losses/value": v,
            "losses/entropy": ent,
            "losses/grad_norm": grad_norm,
            "losses/approx_kl": kl,
            "losses/clip_fraction": clipped,
            "ppo/gradient_steps": float(steps),
            "ppo/stopped_early": float(stopped),
            "charts/policy_lag": lag / max(samples, 1),
            "charts/learner_samples": float(samples),
            "charts/learning_rate": float(self.optimizer.param_groups[0]["lr"]),
        }
        if self.cfg.popart.enabled:
            mus, sigmas = torch.stack([self.values.mu, self.values.sigma]).tolist()
            for i, name in enumerate(self.task_names):
                metrics[f"popart/{name}/mu"] = mus[i]
                metrics[f"popart/{name}/sigma"] = sigmas[i]
        return metrics

    def pop_diagnostics(self) -> dict[str, float]:
        """Each task's policy entropy and clip fraction over the rows of every gradient step
        since the last call; then a new window."""
        out: dict[str, float] = {}
        for i, name in enumerate(self.task_names):
            rows, ent, clipped = self._window[i].tolist()
            if rows > 0:
                out[f"learner/{name}/entropy"] = ent / rows
                out[f"learner/{name}/clip_fraction"] = clipped / rows
        self._window.zero_()
        return out

    def state_dict(self) -> dict[str, Any]:
        """Model, optimiser, PopArt statistics and version, as plain tensors and numbers."""
        return {
            "model": self.model.state_dict(),
            **optimizer_state(self.optimizer, self.model),
            **self.values.state_dict(),
            "version": self.version,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s output."""
        self.model.load_state_dict(state["model"])
        load_optimizer_state(self.optimizer, self.model, state)
        self.values.load_state_dict(state)
        self.version = int(state["version"])
