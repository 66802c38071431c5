"""The IMPALA learning rule: one V-trace update over a mixed batch of unrolls from several
tasks (the built-in ``learner.algorithm: impala``; the protocol every rule meets is
:class:`mtrl.learner.protocol.Learner`).

Order of one update (Hessel et al. 2019, Algorithm 1, per task):

1. every task's unrolls go through its encoder; the features of all tasks go through the
   shared torso in one call (:mod:`mtrl.algorithms.impala.features`; one per task when the tasks'
   gradients are combined), then, with a recurrent core, through the core over
   time from each unroll's initial state, reset where episodes start
   (:meth:`MultiTaskModel.run_cores <mtrl.learner.model.MultiTaskModel.run_cores>`);
2. V-trace targets from the unnormalised values ``σ·n + μ`` under the *old* statistics;
3. per-task PopArt statistics move toward the new targets, and the value heads are rescaled so
   every unnormalised output is preserved exactly;
4. the loss, each task's counted in its value scale, a σ that falls slowly
   (:func:`popart.slow_shrink <mtrl.learner.popart.slow_shrink>`) — policy gradient with
   advantages divided by that scale, value regression on normalised targets (its error
   times (σ / scale)²), entropy bonus times σ / scale (``entropy_coef`` for a discrete
   policy, ``gaussian_entropy_coef`` for a Gaussian; a discrete task's grown while its
   entropy is under its floor, a squashed Gaussian's while its mean sits where tanh is flat:
   :mod:`mtrl.algorithms.impala.entropy_floor`) — is
   averaged over genuine (non-reset) steps (the math: :mod:`mtrl.algorithms.impala.loss`, a pure
   function of each block's tensors; the diagnostics are read from its inputs after the
   step); its backward — task by task when ``learner.multitask.gradients`` combines the
   tasks' gradients of the shared torso (:mod:`mtrl.learner.task_gradients`) — and one
   optimiser step with global gradient-norm clipping.

With PopArt disabled, μ = 0 and σ = 1 throughout and step 3 is skipped.

The parallel learners (:mod:`mtrl.algorithms.impala.data_parallel`,
:mod:`mtrl.algorithms.impala.sharding`) reuse this update and override only its hooks:
:meth:`ImpalaLearner.reduce_moment_sums`, :meth:`ImpalaLearner._global_count`,
:meth:`ImpalaLearner._reduce_gradients`, :meth:`ImpalaLearner._reduce_task_gradients`,
:meth:`ImpalaLearner._clip_gradients` and :meth:`ImpalaLearner._reduce_metric_sums`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from mtrl.algorithms.impala import diagnostics
from mtrl.algorithms.impala.diagnostic_window import DiagnosticWindow
from mtrl.algorithms.impala.entropy_boost import BonusWeights, EntropyBoost
from mtrl.algorithms.impala.features import embed_batches
from mtrl.algorithms.impala.loss import LossInputs, LossSums, loss, task_loss_sums
from mtrl.algorithms.impala.torso_shares import TorsoShares
from mtrl.algorithms.impala.vtrace import VTraceReturns, vtrace
from mtrl.config import LearnerConfig
from mtrl.learner import popart, schedule
from mtrl.learner.batch import TaskBatch
from mtrl.learner.device import Accelerator
from mtrl.learner.distributions import DiagGaussian, PolicyDist
from mtrl.learner.optim import (
    load_optimizer_state,
    make_optimizer,
    optimizer_state,
    param_groups,
    set_learning_rate,
)
from mtrl.learner.task_gradients import GradientCombiner
from mtrl.sync.replica_state import ReplicaState, pack, unpack

__all__ = ["ImpalaLearner"]


@dataclass
class _TaskPart:
    """One task block through the update: its forward (features, policy, log-probabilities of
    the taken actions, V-trace returns), then the loss's inputs and sums
    (:mod:`mtrl.algorithms.impala.loss`), from which the diagnostics are read after the step."""

    batch: TaskBatch
    h: torch.Tensor
    dist: PolicyDist
    logp: torch.Tensor
    vt: VTraceReturns
    inputs: LossInputs | None = None
    sums: LossSums | None = None


class ImpalaLearner:
    """Owns the model's optimiser, the PopArt statistics and the policy version."""

    distributed = False
    """Whether this learner is one of several replicas (a replica may get no batches)."""

    def __init__(
        self,
        model: nn.Module,
        cfg: LearnerConfig,
        task_names: Sequence[str],
        lr_scales: Sequence[float] | None = None,
    ) -> None:
        """``lr_scales``: per task, a multiplier on the step size of the parameters only that
        task uses (``TaskConfig.learning_rate_scale``; :mod:`mtrl.learner.optim` says why)."""
        self.model = model
        self.cfg = cfg
        self.task_names = list(task_names)
        self.device = next(model.parameters()).device
        self.accelerator = Accelerator(self.device)
        k = len(task_names)
        # Moments in float64: ν − μ² loses precision in float32 when returns are ~1e3.
        self.mu = torch.zeros(k, dtype=torch.float64, device=self.device)
        self.nu = torch.ones(k, dtype=torch.float64, device=self.device)
        # Tasks whose statistics were set from targets (PopArtConfig.init_from_first_batch).
        self.popart_seen = torch.zeros(k, dtype=torch.bool, device=self.device)
        # The scale each task's value error is measured in: σ, but falling at most
        # PopArtConfig.value_scale_shrink per update (popart.slow_shrink); σ(μ=0, ν=1) is 1.
        self.value_scale = torch.ones(k, dtype=torch.float64, device=self.device)
        # Each task's entropy-bonus multiplier (entropy_floor, saturation_ceiling).
        self.boost = EntropyBoost(
            getattr(model, "max_entropy", (float("nan"),) * k),
            getattr(model, "squashed", (False,) * k),
            cfg.entropy_floor,
            cfg.saturation_ceiling,
        )
        self.bonus = BonusWeights.of(cfg.entropy_coef, cfg.gaussian_entropy_coef, model.gaussian)
        self.plain_bonus = torch.tensor(self.bonus.plain, dtype=torch.float32, device=self.device)
        self.version = 0
        self.optimizer = make_optimizer(param_groups(model, lr_scales), cfg)
        self.window = DiagnosticWindow(self.task_names, model.gaussian)
        combining = cfg.multitask.gradients != "sum"
        shared = model.shared_parameters() if combining else []
        self.combiner = GradientCombiner(cfg.multitask, shared, k)
        own = {id(p) for p in self.combiner.params}
        self.own = [p for p in model.parameters() if p.requires_grad and id(p) not in own]
        """The trainable parameters the combiner leaves: each reached by one task's loss (or
        by its row)."""
        self.torso_shares = TorsoShares(model, cfg.diagnostics_every, k)

    @property
    def local_tasks(self) -> list[int]:
        """Tasks whose batches this learner takes (all of them, unless tasks are sharded)."""
        return list(range(len(self.task_names)))

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

    def _embed(self, batches: Sequence[TaskBatch]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Features of every batch (:func:`mtrl.algorithms.impala.features.embed_batches`; one torso
        call per task when the tasks' gradients are combined)."""
        per_task, dim = self.combiner.combining, self.cfg.model.encoder_dim
        return embed_batches(self.model, batches, per_task, dim, self.device)

    def set_progress(self, progress: float) -> None:
        """Tell the learner how far the run is (env steps / total): sets the step size."""
        set_learning_rate(self.optimizer, schedule.learning_rate(self.cfg, progress))

    def update(self, batches: Sequence[TaskBatch]) -> dict[str, float]:
        """One optimiser step on ``batches``; returns scalar metrics for logging."""
        if not batches and not self.distributed:
            raise ValueError("ImpalaLearner.update needs at least one TaskBatch")
        cfg = self.cfg
        self.model.train()
        h_all, parts = self._forward(batches)
        if cfg.popart.enabled:
            self._popart_update(parts)
        sums, counts = self._loss_sums(parts)
        total = self._global_count(sum(counts))
        self.optimizer.zero_grad(set_to_none=True)
        grads, shares = None, None
        if self.combiner.combining:  # each task's backward alone; the shared part combined below
            grads = self.combiner.task_gradients(self._task_losses(parts, total), self.own)
        else:
            if self.torso_shares.measured_apart(self.version, self.distributed):
                shares = self.torso_shares.measure(self._task_losses(parts, total))
            loss_ = loss(sums, total, cfg.value_coef, self.bonus.unit)
            if not parts:  # an idle replica still runs the torso's backward (FSDP collectives)
                loss_ = loss_ + 0.0 * h_all.sum()
            loss_.backward()
        self._reduce_gradients()
        if grads is not None:
            grads = self._reduce_task_gradients(grads)
            self.combiner.apply(grads, self.version)
            shares = self.torso_shares.from_rows(grads, self.version)
        grad_norm = self._clip_gradients()
        self.optimizer.step()
        self.accelerator.after_step()
        self.version += 1
        metrics, diag = self._metrics(parts, sums, counts, total, grad_norm, shares)
        field = diagnostics.FIELDS.index
        count = diag[:, field("count")]
        n = count.clamp(min=1)
        self.boost.step(diag[:, field("entropy")] / n, diag[:, field("saturated")] / n, count > 0)
        for i, name in enumerate(self.task_names):
            if self.boost.ruled[i]:
                metrics[f"learner/{name}/entropy_boost"] = float(self.boost.values[i])
        return metrics

    @property
    def entropy_boost(self) -> torch.Tensor:
        """Each task's entropy-bonus multiplier (:class:`EntropyBoost`), float64 on the host."""
        return self.boost.values

    def _forward(self, batches: Sequence[TaskBatch]) -> tuple[torch.Tensor, list[_TaskPart]]:
        """Features, policies and V-trace targets (under the old statistics) of every batch."""
        cfg, model = self.cfg, self.model
        w, b = model.value_weight, model.value_bias
        mu, sigma = self._stats()
        h_all, hs = self._embed(batches)
        parts: list[_TaskPart] = []
        for batch, h in zip(batches, hs, strict=True):
            k = batch.task
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
            parts.append(_TaskPart(batch, h, dist, logp, vt))
        return h_all, parts

    def _loss_sums(self, parts: list[_TaskPart]) -> tuple[LossSums, list[int]]:
        """The loss's sums over every block (new statistics; :func:`task_loss_sums` per
        block, each part keeping its inputs and sums) and each block's count of valid steps.

        Sums, not means: replicas divide by the count of the whole batch (``_global_count``).
        """
        w, b = self.model.value_weight, self.model.value_bias
        mu, sigma = self._stats()
        # Each task's loss counts in its slow-falling value scale (σ and the scale both stay 1
        # without PopArt): the value error times (σ / scale)² ≤ 1, the advantages divided by
        # the scale and the plain entropy bonus times σ / scale, so a solved task's noise does not
        # grow as its σ collapses, and its policy keeps the balance of advantage and bonus.
        scale = self.value_scale.float()
        policy_factor = sigma / scale
        value_factor = policy_factor**2
        # The floor's and ceiling's extra bonus (boost − 1) enforces a constraint: it stays in
        # units of entropy_coef, however small σ / scale has become, and acts on a Gaussian
        # too (whose plain weight is gaussian_entropy_coef, 0 by default).
        on = self.bonus.boost_on
        bonus_weight = self.plain_bonus * policy_factor + on * self.boost.multipliers().to(sigma)
        bonus_weight = bonus_weight - on
        zero = torch.zeros((), device=self.device)
        total = LossSums(zero, zero, zero, zero)
        counts = []
        for p in parts:
            k = p.batch.task
            p.inputs = LossInputs(
                logp=p.logp,
                advantages=p.vt.pg_advantages / scale[k],
                value=p.h[:-1] @ w[k] + b[k],  # the new (rescaled) head
                target=(p.vt.vs - mu[k]) / sigma[k],
                entropy=p.dist.entropy(),
                valid=p.batch.valid,
            )
            p.sums = task_loss_sums(p.inputs, p.batch.loss_weight, value_factor[k], bonus_weight[k])
            total = total + p.sums
            counts.append(p.batch.num_samples)
        return total, counts

    def _task_diagnostics(self, p: _TaskPart) -> torch.Tensor:
        """One block's diagnostic sums (:func:`diagnostics.task_sums`), read from the loss's
        inputs after the step."""
        x, dist = p.inputs, p.dist
        gaussian = isinstance(dist, DiagGaussian)
        return diagnostics.task_sums(
            valid=x.valid,
            entropy=x.entropy,
            behaviour_logp=p.batch.behaviour_logp,
            target_logp=x.logp.detach(),
            advantages=x.advantages,
            value=x.value,
            target=x.target,
            rho_bar=self.cfg.rho_bar,
            log_std=dist.log_std if gaussian else None,
            mean=dist.mean if gaussian else None,
            squashed=dist.log_half_width if gaussian else None,
        )

    def _task_losses(self, parts: list[_TaskPart], count: int) -> dict[int, torch.Tensor]:
        """Each present task's part of the loss (its blocks' sums over ``count`` samples)."""
        per_task: dict[int, torch.Tensor] = {}
        for p in parts:
            k = p.batch.task
            own = loss(p.sums, count, self.cfg.value_coef, self.bonus.unit)
            per_task[k] = per_task[k] + own if k in per_task else own
        return per_task

    def _metrics(
        self,
        parts: list[_TaskPart],
        sums: LossSums,
        counts: list[int],
        total: int,
        grad_norm: torch.Tensor,
        shares: list[float] | None = None,
    ) -> tuple[dict[str, float], torch.Tensor]:
        """Losses (means over the whole batch), policy lag per sample, PopArt statistics and
        the per-task diagnostics of this update (:mod:`mtrl.algorithms.impala.diagnostics`);
        and those diagnostics' sums over all replicas, ``[K, len(FIELDS)]`` on the CPU."""
        cfg, n = self.cfg, max(total, 1)
        old = self.version - 1
        lag = sum((old - p.batch.policy_version) * c for p, c in zip(parts, counts, strict=True))
        local = sums.as_tensor()
        extra = torch.tensor([lag], dtype=torch.float64, device=self.device)
        diag = torch.zeros(len(self.task_names), len(diagnostics.FIELDS), dtype=torch.float64)
        diag = diag.to(self.device)
        for p in parts:
            diag[p.batch.task] += self._task_diagnostics(p)
        reduced = self._reduce_metric_sums(torch.cat([local, extra, diag.reshape(-1)])).cpu()
        pg, v, ent, bonus, lags = reduced[:5].tolist()
        diag = reduced[5:].reshape(diag.shape)
        self.window.add(diag, shares)
        metrics = {
            "losses/total": (pg + cfg.value_coef * v - self.bonus.unit * bonus) / n,  # the loss
            "losses/policy": pg / n,
            "losses/value": v / n,
            "losses/entropy": ent / n,
            "losses/grad_norm": float(grad_norm),
            "charts/policy_lag": lags / n,  # per sample: splitting a block does not change it
            "charts/learner_samples": float(total),
            "charts/learning_rate": float(self.optimizer.param_groups[0]["lr"]),
        }
        if cfg.popart.enabled:
            mus, sigmas, scales = torch.stack([self.mu, self.sigma, self.value_scale]).tolist()
            for i, name in enumerate(self.task_names):
                metrics[f"popart/{name}/mu"] = mus[i]
                metrics[f"popart/{name}/sigma"] = sigmas[i]
                metrics[f"popart/{name}/value_scale"] = scales[i]
        metrics.update(self.window.metrics(diag, shares))
        return metrics, diag

    def pop_diagnostics(self) -> dict[str, float]:
        """Per-task diagnostics averaged over every update since the last call (the trainer
        logs these: one update's figures are noisy), then start a new window."""
        return self.window.pop()

    @torch.no_grad()
    def _popart_update(self, parts: list[_TaskPart]) -> None:
        pc, model = self.cfg.popart, self.model
        k = len(self.task_names)
        sums = torch.zeros(3, k, dtype=torch.float64, device=self.device)
        for p in parts:
            batch = p.batch
            ids = torch.full_like(p.vt.vs, batch.task, dtype=torch.long)
            m = popart.task_moments(p.vt.vs.double(), ids, k, mask=batch.valid)
            sums += popart.moments_to_sums(m)
        moments = popart.moments_from_sums(self.reduce_moment_sums(sums))
        step = popart.popart_step(
            self.mu,
            self.nu,
            model.value_weight.data,
            model.value_bias.data,
            moments,
            pc.beta,
            pc.sigma_min,
            pc.sigma_max,
            first=~self.popart_seen if pc.init_from_first_batch else None,
        )
        seen = moments.count.to(self.device) > 0
        fresh = seen & ~self.popart_seen if pc.init_from_first_batch else None
        self.value_scale.copy_(
            popart.slow_shrink(step.sigma, self.value_scale, pc.value_scale_shrink, seen, fresh)
        )
        self.popart_seen |= seen
        self.mu.copy_(step.mu)
        self.nu.copy_(step.nu)
        model.value_weight.copy_(step.weight)
        model.value_bias.copy_(step.bias)

    # Hooks of the parallel learners: identities on one process.

    def reduce_moment_sums(self, sums: torch.Tensor) -> torch.Tensor:
        """Combine PopArt moment sums across data-parallel replicas (identity on one)."""
        return sums

    def _global_count(self, count: int) -> int:
        """Valid samples in the whole (all replicas') batch: the loss's denominator."""
        return count

    def _reduce_gradients(self) -> None:
        """Turn each replica's gradient into the whole batch's (nothing to do on one)."""

    def _reduce_task_gradients(self, grads: torch.Tensor) -> torch.Tensor:
        """Per-task gradients of the shared parameters ``[K, P]``, summed over replicas."""
        return grads

    def _clip_gradients(self) -> torch.Tensor:
        """Clip the global gradient norm to ``max_grad_norm``; returns the norm before."""
        return nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)

    def _reduce_metric_sums(self, sums: torch.Tensor) -> torch.Tensor:
        """Sum per-replica metric sums (float64 ``[4]``) over replicas (identity on one)."""
        return sums

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            **optimizer_state(self.optimizer, self.model),
            **self._statistics(),
        }

    def _statistics(self) -> dict[str, Any]:
        """PopArt statistics and the policy version (the same on every replica)."""
        return {
            "mu": self.mu,
            "nu": self.nu,
            "popart_seen": self.popart_seen,
            "value_scale": self.value_scale,
            "entropy_boost": self.entropy_boost,
            "version": self.version,
        }

    # Loosely synchronised replicas (mtrl.sync.replica_state says what and why).

    def replica_state(self) -> ReplicaState:
        """Parameters with the value heads unnormalised, and the averaged statistics."""
        mu, sigma = self._stats()
        return pack(self.model, mu, sigma, self._replica_stats(), self.popart_seen)

    def load_replica_state(self, state: ReplicaState) -> None:
        """Take averaged statistics, then the parameters, normalising the value heads by them."""
        unpack(state, self.model, self._replica_stats(), self.popart_seen, self._stats)

    def _replica_stats(self) -> list[torch.Tensor]:
        return [self.mu, self.nu, self.value_scale, self.entropy_boost]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        load_optimizer_state(self.optimizer, self.model, state)
        self._load_statistics(state)

    def _load_statistics(self, state: dict[str, Any]) -> None:
        """PopArt statistics and the policy version from :meth:`state_dict`'s output."""
        self.mu.copy_(state["mu"])
        self.nu.copy_(state["nu"])
        self.version = int(state["version"])
        # Checkpoints from before first-batch initialisation: a trained learner has seen its tasks.
        seen = state.get("popart_seen", torch.full_like(self.popart_seen, self.version > 0))
        self.popart_seen.copy_(seen)
        # Checkpoints from before the value scale: it starts at σ.
        self.value_scale.copy_(state.get("value_scale", self.sigma))
        # Checkpoints from before the entropy floor: every bonus at its plain weight.
        self.entropy_boost.copy_(state.get("entropy_boost", torch.ones_like(self.entropy_boost)))
