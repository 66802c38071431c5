"""Per-task learning diagnostics: what each task's policy, value and importance weights do.

Multi-task runs can learn a task and then lose it. These figures make the mechanisms visible
per task, as sums over the genuine (non-reset) steps of one update so replicas can add them
(:func:`task_sums`), turned into means by :func:`task_means`:

* ``entropy``: mean policy entropy (of the raw distribution);
* ``kl``: KL(μ‖π) between the behaviour policy that acted and the learner's, with the
  low-variance estimator ``(r − 1) − log r``, ``r = π/μ`` (Schulman 2020, "Approximating KL
  divergence"); 0 when they agree, large when stale unrolls meet a fast-moving policy;
* ``rho``, ``rho_clipped``: mean importance ratio π/μ and the fraction clipped at ρ̄;
* ``adv_abs``: mean |advantage| as the policy gradient sees it (divided by the task's value
  scale, :class:`mtrl.algorithms.impala.learner.ImpalaLearner`);
* ``value_error``, ``value_ev``: mean squared error of the normalised value against its
  normalised V-trace target, and the explained variance 1 − MSE / Var(target);
* Gaussian heads (``Box`` actions): ``log_std`` (mean of the learned log-std) and
  ``saturated``, the fraction of action dims whose mean lies where the tanh squash is flat
  (``|mean| > 2``, tanh(2) ≈ 0.96): there, every sample is the same env action and the policy
  gradient carries no signal back. Only the dims the env squashes count when the head knows
  them (its ``log_half_width``, NaN on unbounded dims).

:func:`grad_shares` measures how much of the shared torso's gradient each task's loss makes.
Pure functions of tensors: no state, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = ["FIELDS", "SATURATION", "grad_shares", "task_means", "task_sums"]

#: |pre-squash mean| beyond which a Gaussian action dim counts as saturated (tanh(2) ≈ 0.964).
SATURATION = 2.0

#: The sums :func:`task_sums` returns, in order.
FIELDS = (
    "count",
    "entropy",
    "kl",
    "rho",
    "rho_clipped",
    "adv_abs",
    "value_sq_err",
    "target",
    "target_sq",
    "log_std",
    "saturated",
)


@torch.no_grad()
def task_sums(
    *,
    valid: torch.Tensor,
    entropy: torch.Tensor,
    behaviour_logp: torch.Tensor,
    target_logp: torch.Tensor,
    advantages: torch.Tensor,
    value: torch.Tensor,
    target: torch.Tensor,
    rho_bar: float,
    log_std: torch.Tensor | None = None,
    mean: torch.Tensor | None = None,
    squashed: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sums over the valid steps of one task's block, float64 ``[len(FIELDS)]``, outside the
    autograd graph (a figure that kept it would hold every update's graph until it is logged).

    ``valid`` and every per-step input are ``[T, N]``; ``value`` and ``target`` are the
    normalised prediction and target; ``advantages`` as the policy gradient uses them.
    ``log_std`` and ``mean`` (``[T, N, *act]``) only for a Gaussian policy; ``squashed``
    (``[*act]``, finite on the dims the env squashes, e.g. the head's ``log_half_width``)
    restricts ``saturated`` to those dims (none finite: 0).
    """
    m = valid.to(torch.float64)
    log_r = (target_logp - behaviour_logp).to(torch.float64)
    r = log_r.exp()
    t = target.to(torch.float64)

    def s(x: torch.Tensor) -> torch.Tensor:
        return (x.to(torch.float64) * m).sum()

    zero = torch.zeros((), dtype=torch.float64, device=m.device)
    if mean is not None and log_std is not None:
        dims = mean.shape[valid.ndim :].numel()
        per_step = tuple(range(valid.ndim, mean.ndim))
        flat_std = log_std.to(torch.float64).expand_as(mean).mean(dim=per_step) if dims else zero
        flat = mean.detach().abs() > SATURATION
        if squashed is None:
            sat = flat.to(torch.float64).mean(dim=per_step)
        else:
            on = torch.isfinite(squashed).expand_as(flat)
            sat = (flat & on).to(torch.float64).sum(dim=per_step)
            sat = sat / on.to(torch.float64).sum(dim=per_step).clamp(min=1)
        log_std_sum, sat_sum = s(flat_std), s(sat)
    else:
        log_std_sum, sat_sum = zero, zero
    return torch.stack(
        [
            m.sum(),
            s(entropy.detach()),
            s((r - 1.0) - log_r),
            s(r),
            s((log_r > math.log(rho_bar) + 1e-3).to(torch.float64)),  # not float noise at 1
            s(advantages.abs()),
            s((value.detach().to(torch.float64) - t) ** 2),
            s(t),
            s(t * t),
            log_std_sum,
            sat_sum,
        ]
    )


def task_means(sums: torch.Tensor, gaussian: bool) -> dict[str, float]:
    """Means from :func:`task_sums`' output (summed over blocks and replicas); {} if no step."""
    v = dict(zip(FIELDS, sums.tolist(), strict=True))
    n = v["count"]
    if n <= 0:
        return {}
    var = max(v["target_sq"] / n - (v["target"] / n) ** 2, 0.0)
    mse = v["value_sq_err"] / n
    out = {
        "entropy": v["entropy"] / n,
        "kl": v["kl"] / n,
        "rho": v["rho"] / n,
        "rho_clipped": v["rho_clipped"] / n,
        "adv_abs": v["adv_abs"] / n,
        "value_error": mse,
        "value_ev": 1.0 - mse / var if var > 1e-12 else float("nan"),
    }
    if gaussian:
        out["log_std"] = v["log_std"] / n
        out["saturated"] = v["saturated"] / n
    return out


def grad_shares(
    task_losses: Sequence[torch.Tensor], params: Sequence[torch.nn.Parameter]
) -> list[float]:
    """Each loss's share ``‖g_k‖ / Σ_j ‖g_j‖`` of the gradient on ``params`` (the torso).

    The losses must share a graph that is still alive (it is kept for the caller's own
    backward). A loss that does not reach ``params`` gets share 0; all zero if none does, or
    if there are no ``params`` (a model without a shared torso).
    """
    if not params:
        return [0.0] * len(task_losses)
    norms = []
    for loss in task_losses:
        grads = torch.autograd.grad(loss, list(params), retain_graph=True, allow_unused=True)
        sq = sum((g.detach().double() ** 2).sum() for g in grads if g is not None)
        norms.append(float(sq) ** 0.5 if isinstance(sq, torch.Tensor) else 0.0)
    total = sum(norms)
    return [n / total if total > 0 else 0.0 for n in norms]
