"""The learner: one IMPALA update over a mixed batch of unrolls from several tasks.

Order of one update (Hessel et al. 2019, Algorithm 1, per task):

1. every task's unrolls go through its encoder and the shared torso once (``embed``);
2. V-trace targets from the unnormalised values ``σ·n + μ`` under the *old* statistics;
3. per-task PopArt statistics move toward the new targets, and the value heads are rescaled so
   every unnormalised output is preserved exactly;
4. the loss — policy gradient with advantages divided by the task's σ, value regression on
   normalised targets, entropy bonus — is averaged over genuine (non-reset) steps; one
   optimiser step with global gradient-norm clipping.

With PopArt disabled, μ = 0 and σ = 1 throughout and step 3 is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from mtrl.config import LearnerConfig
from mtrl.learner import popart
from mtrl.learner.batch import TaskBatch
from mtrl.learner.vtrace import vtrace


def resolve_device(name: str) -> torch.device:
    """``auto`` → cuda when available, else cpu; anything else as torch reads it."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class Learner:
    """Owns the model's optimiser, the PopArt statistics and the policy version."""

    def __init__(self, model: nn.Module, cfg: LearnerConfig, task_names: Sequence[str]) -> None:
        self.model = model
        self.cfg = cfg
        self.task_names = list(task_names)
        self.device = next(model.parameters()).device
        k = len(task_names)
        # Moments in float64: ν − μ² loses precision in float32 when returns are ~1e3.
        self.mu = torch.zeros(k, dtype=torch.float64, device=self.device)
        self.nu = torch.ones(k, dtype=torch.float64, device=self.device)
        self.version = 0
        params = model.parameters()
        if cfg.optimizer == "adam":
            self.optimizer: torch.optim.Optimizer = torch.optim.Adam(
                params, lr=cfg.learning_rate, eps=1e-5
            )
        else:
            self.optimizer = torch.optim.RMSprop(params, lr=cfg.learning_rate, eps=0.01, alpha=0.99)

    @property
    def sigma(self) -> torch.Tensor:
        pc = self.cfg.popart
        return popart.sigma(self.mu, self.nu, pc.sigma_min, pc.sigma_max)

    def _stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(μ, σ) as float32 for the value heads; (0, 1) without PopArt."""
        if not self.cfg.popart.enabled:
            k = len(self.task_names)
            return torch.zeros(k, device=self.device), torch.ones(k, device=self.device)
        return self.mu.float(), self.sigma.float()

    def update(self, batches: Sequence[TaskBatch]) -> dict[str, float]:
        """One optimiser step on ``batches``; returns scalar metrics for logging."""
        cfg, model = self.cfg, self.model
        model.train()
        w, b = model.value_weight, model.value_bias
        mu, sigma = self._stats()
        parts: list[dict[str, Any]] = []
        for batch in batches:
            k = batch.task
            h = model.embed(k, batch.obs)  # [T+1, N, H]
            mask = model.action_mask(k, batch.obs) if model.has_action_mask(k) else None
            dist = model.policy(k, h[:-1], None if mask is None else mask[:-1])
            logp = dist.log_prob(batch.actions)
            with torch.no_grad():
                values = (h @ w[k] + b[k]) * sigma[k] + mu[k]  # unnormalised, old stats
                vt = vtrace(
                    behaviour_logp=batch.behaviour_logp,
                    target_logp=logp.detach(),
                    rewards=batch.rewards,
                    values=values[:-1],
                    bootstrap_value=values[-1],
                    discounts=cfg.gamma * (~batch.terminated).float(),
                    truncated=batch.truncated,
                    rho_bar=cfg.rho_bar,
                    c_bar=cfg.c_bar,
                    lam=cfg.lam,
                )
            parts.append({"batch": batch, "h": h, "dist": dist, "logp": logp, "vt": vt})

        if cfg.popart.enabled:
            self._popart_update(parts)
            mu, sigma = self._stats()

        pg_sum = v_sum = ent_sum = torch.zeros((), device=self.device)
        count = 0
        for p in parts:
            batch, k = p["batch"], p["batch"].task
            mask = batch.valid.float()
            n_pred = p["h"][:-1] @ w[k] + b[k]  # new (rescaled) head
            target = (p["vt"].vs - mu[k]) / sigma[k]
            adv = p["vt"].pg_advantages / sigma[k]
            pg_sum = pg_sum - (p["logp"] * adv * mask).sum()
            v_sum = v_sum + 0.5 * ((n_pred - target) ** 2 * mask).sum()
            ent_sum = ent_sum + (p["dist"].entropy() * mask).sum()
            count += batch.num_samples
        n = max(count, 1)
        loss = (pg_sum + cfg.value_coef * v_sum - cfg.entropy_coef * ent_sum) / n
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        self.version += 1

        lags = [self.version - 1 - p["batch"].policy_version for p in parts]
        metrics = {
            "losses/total": loss.item(),
            "losses/policy": pg_sum.item() / n,
            "losses/value": v_sum.item() / n,
            "losses/entropy": ent_sum.item() / n,
            "losses/grad_norm": float(grad_norm),
            "charts/policy_lag": sum(lags) / len(lags),
            "charts/learner_samples": float(count),
        }
        if cfg.popart.enabled:
            for i, name in enumerate(self.task_names):
                metrics[f"popart/{name}/mu"] = float(self.mu[i])
                metrics[f"popart/{name}/sigma"] = float(sigma[i])
        return metrics

    @torch.no_grad()
    def _popart_update(self, parts: list[dict[str, Any]]) -> None:
        pc, model = self.cfg.popart, self.model
        k = len(self.task_names)
        sums = torch.zeros(3, k, dtype=torch.float64, device=self.device)
        for p in parts:
            batch = p["batch"]
            ids = torch.full_like(p["vt"].vs, batch.task, dtype=torch.long)
            m = popart.task_moments(p["vt"].vs.double(), ids, k, mask=batch.valid)
            sums += popart.moments_to_sums(m)
        sums = self.reduce_moment_sums(sums)
        step = popart.popart_step(
            self.mu,
            self.nu,
            model.value_weight.data,
            model.value_bias.data,
            popart.moments_from_sums(sums),
            pc.beta,
            pc.sigma_min,
            pc.sigma_max,
        )
        self.mu.copy_(step.mu)
        self.nu.copy_(step.nu)
        model.value_weight.copy_(step.weight)
        model.value_bias.copy_(step.bias)

    def reduce_moment_sums(self, sums: torch.Tensor) -> torch.Tensor:
        """Combine PopArt moment sums across data-parallel replicas (identity on one)."""
        return sums

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "mu": self.mu,
            "nu": self.nu,
            "version": self.version,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.mu.copy_(state["mu"])
        self.nu.copy_(state["nu"])
        self.version = int(state["version"])
