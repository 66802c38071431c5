"""Per-task PopArt: adaptive normalisation of value targets that preserves the outputs.

Hessel et al. 2019, "Multi-task Deep Reinforcement Learning with PopArt" (AAAI;
arXiv:1809.04474): each task i keeps exponential moving averages of the first and second
moments of its value targets, μ_i and ν_i, and σ_i = sqrt(ν_i − μ_i²). The value head predicts
the *normalised* value n_i(h) = w_i·h + b_i; the unnormalised value is V_i = σ_i n_i + μ_i.
When the statistics move, the head is rescaled so that V_i is unchanged for every input ("Preserving
Outputs Precisely", van Hasselt et al. 2016, "Learning values across many orders of magnitude",
arXiv:1602.07714, Algorithm 1).

Statistics are built for data-parallel replicas: :func:`task_moments` gives each replica's
per-task counts and moments, :func:`moments_to_sums` turns them into one ``[3, K]`` tensor of
sums that replicas all-reduce with a plain SUM, and :func:`moments_from_sums` turns the reduced
sums back into moments. Every replica then applies the same :func:`update_stats` and ends with
identical statistics. All functions are pure; none keeps state or does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

__all__ = [
    "Moments",
    "PopArtStep",
    "combine_moments",
    "moments_from_sums",
    "moments_to_sums",
    "normalize",
    "popart_step",
    "preserve_outputs",
    "sigma",
    "slow_shrink",
    "task_moments",
    "unnormalize",
    "update_stats",
]


class Moments(NamedTuple):
    """Per-task statistics of one batch of targets, each ``[K]``.

    ``count`` is the number of (unmasked) targets of each task; ``mean`` and ``mean_sq`` are
    their first and second moments, 0 where ``count`` is 0.
    """

    count: torch.Tensor
    mean: torch.Tensor
    mean_sq: torch.Tensor


class PopArtStep(NamedTuple):
    """New state from :func:`popart_step`: statistics ``[K]`` and the rescaled value head."""

    mu: torch.Tensor
    nu: torch.Tensor
    sigma: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor


def _fail(fn: str, msg: str) -> ValueError:
    return ValueError(f"popart.{fn}: {msg}")


def _check_vector(fn: str, name: str, x: object, num_tasks: int | None = None) -> int:
    if not isinstance(x, torch.Tensor) or x.ndim != 1:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise _fail(fn, f"{name} must be a [K] tensor (one entry per task), got {got}")
    if not x.dtype.is_floating_point:
        raise _fail(fn, f"{name} must be floating point, got {x.dtype}")
    if num_tasks is not None and x.shape[0] != num_tasks:
        raise _fail(fn, f"{name} has {x.shape[0]} tasks, expected {num_tasks}")
    return x.shape[0]


def _broadcast(fn: str, name: str, x: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    try:
        return torch.broadcast_to(x, shape)
    except RuntimeError:
        raise _fail(
            fn, f"{name} of shape {tuple(x.shape)} does not broadcast to {tuple(shape)}"
        ) from None


def _check_task_ids(fn: str, task_ids: object, shape: torch.Size, num_tasks: int) -> torch.Tensor:
    if not isinstance(task_ids, torch.Tensor):
        raise _fail(fn, f"task_ids must be a torch.Tensor, got {type(task_ids).__name__}")
    if (
        task_ids.dtype.is_floating_point
        or task_ids.dtype.is_complex
        or task_ids.dtype == torch.bool
    ):
        raise _fail(fn, f"task_ids must be an integer tensor, got {task_ids.dtype}")
    ids = _broadcast(fn, "task_ids", task_ids, shape).long()
    # Range check only on the host: on an accelerator it would force a device sync.
    if ids.device.type == "cpu" and ids.numel() and (ids.min() < 0 or ids.max() >= num_tasks):
        raise _fail(fn, f"task_ids must lie in [0, {num_tasks}), got [{ids.min()}, {ids.max()}]")
    return ids


def task_moments(
    targets: torch.Tensor,
    task_ids: torch.Tensor,
    num_tasks: int,
    mask: torch.Tensor | None = None,
) -> Moments:
    """Per-task count, mean and mean of squares of ``targets`` (one pass, no Python loops).

    Args:
      targets: value targets of any shape, e.g. V-trace ``vs`` of shape ``[T, B]``.
      task_ids: integer task of each target, broadcastable to ``targets`` (``[B]`` for a
        time-major batch whose columns each belong to one task).
      num_tasks: K, the number of tasks.
      mask: optional bool or {0, 1} tensor broadcastable to ``targets``; zero entries are
        ignored (reset steps, padding).

    Returns:
      :class:`Moments` in the dtype of ``targets``. Tasks absent from the batch have count 0.
    """
    if not isinstance(targets, torch.Tensor) or not targets.dtype.is_floating_point:
        got = targets.dtype if isinstance(targets, torch.Tensor) else type(targets).__name__
        raise _fail("task_moments", f"targets must be a floating-point tensor, got {got}")
    if num_tasks < 1:
        raise _fail("task_moments", f"num_tasks must be >= 1, got {num_tasks}")
    ids = _check_task_ids("task_moments", task_ids, targets.shape, num_tasks).reshape(-1)
    x = targets.detach().reshape(-1)
    if mask is None:
        w = torch.ones_like(x)
    else:
        if not isinstance(mask, torch.Tensor):
            raise _fail("task_moments", f"mask must be a torch.Tensor, got {type(mask).__name__}")
        w = _broadcast("task_moments", "mask", mask, targets.shape).reshape(-1).to(x.dtype)
    zeros = x.new_zeros(num_tasks)
    count = zeros.index_add(0, ids, w)
    sums = zeros.index_add(0, ids, w * x)
    sums_sq = zeros.index_add(0, ids, w * x * x)
    safe = count.clamp(min=1.0)
    return Moments(count=count, mean=sums / safe, mean_sq=sums_sq / safe)


def moments_to_sums(moments: Moments) -> torch.Tensor:
    """Stack ``[count, count·mean, count·mean_sq]`` into one ``[3, K]`` tensor.

    Sums of these over replicas are the sums over the whole batch, so a data-parallel learner
    combines its replicas with one ``torch.distributed.all_reduce(sums)`` (SUM) and then calls
    :func:`moments_from_sums`.
    """
    count, mean, mean_sq = moments
    return torch.stack([count, count * mean, count * mean_sq])


def moments_from_sums(sums: torch.Tensor) -> Moments:
    """Inverse of :func:`moments_to_sums`, applied after summing over replicas."""
    if not isinstance(sums, torch.Tensor) or sums.ndim != 2 or sums.shape[0] != 3:
        got = tuple(sums.shape) if isinstance(sums, torch.Tensor) else type(sums).__name__
        raise _fail("moments_from_sums", f"sums must be a [3, K] tensor, got {got}")
    count, s1, s2 = sums.unbind(0)
    safe = count.clamp(min=1.0)
    return Moments(count=count, mean=s1 / safe, mean_sq=s2 / safe)


def combine_moments(parts: Sequence[Moments]) -> Moments:
    """Moments of the union of several batches (the single-process form of the all-reduce)."""
    if len(parts) == 0:
        raise _fail("combine_moments", "parts must hold at least one Moments")
    sums = [moments_to_sums(m) for m in parts]
    if any(s.shape != sums[0].shape for s in sums):
        shapes = [tuple(s.shape[1:]) for s in sums]
        raise _fail("combine_moments", f"parts disagree on the number of tasks: {shapes}")
    return moments_from_sums(torch.stack(sums).sum(0))


def update_stats(
    mu: torch.Tensor,
    nu: torch.Tensor,
    moments: Moments,
    beta: float | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exponential moving averages of the moments, for tasks seen in the batch only.

    ``mu' = (1 − β) mu + β mean`` and ``nu' = (1 − β) nu + β mean_sq`` where ``count > 0``;
    tasks with ``count == 0`` keep their statistics. ``beta`` is a float or a ``[K]`` tensor
    (a per-task step size). Results are in the dtype of ``mu`` (float64 statistics avoid the
    cancellation in ν − μ² for targets far from zero).
    """
    k = _check_vector("update_stats", "mu", mu)
    _check_vector("update_stats", "nu", nu, k)
    for name, x in zip(Moments._fields, moments, strict=True):
        _check_vector("update_stats", f"moments.{name}", x, k)
    if isinstance(beta, torch.Tensor):
        if beta.ndim not in (0, 1) or (beta.ndim == 1 and beta.shape[0] != k):
            raise _fail("update_stats", f"beta must be a scalar or [{k}], got {tuple(beta.shape)}")
        beta = beta.to(mu)
        bad = beta.device.type == "cpu" and bool(((beta < 0) | (beta > 1)).any())
    else:
        bad = not 0.0 <= beta <= 1.0
    if bad:
        raise _fail("update_stats", f"beta must be in [0, 1], got {beta}")
    seen = moments.count.to(mu.device) > 0
    mean, mean_sq = moments.mean.to(mu), moments.mean_sq.to(mu)
    mu_new = torch.where(seen, (1 - beta) * mu + beta * mean, mu)
    nu_new = torch.where(seen, (1 - beta) * nu + beta * mean_sq, nu)
    return mu_new, nu_new


def sigma(
    mu: torch.Tensor, nu: torch.Tensor, sigma_min: float = 1e-4, sigma_max: float = 1e6
) -> torch.Tensor:
    """σ = sqrt(ν − μ²), clipped to ``[sigma_min, sigma_max]`` (never 0, never NaN)."""
    k = _check_vector("sigma", "mu", mu)
    _check_vector("sigma", "nu", nu, k)
    if not 0.0 < sigma_min <= sigma_max:
        raise _fail("sigma", f"need 0 < sigma_min <= sigma_max, got {sigma_min}, {sigma_max}")
    return (nu - mu * mu).clamp(min=sigma_min**2).sqrt().clamp(max=sigma_max)


def slow_shrink(
    sigma_new: torch.Tensor,
    scale_old: torch.Tensor,
    max_shrink: float,
    seen: torch.Tensor,
    fresh: torch.Tensor | None = None,
) -> torch.Tensor:
    """A scale that follows σ up at once and down slowly: each task's value loss is measured
    in it (:class:`mtrl.algorithms.impala.learner.ImpalaLearner`).

    Returns ``max(sigma_new, (1 − max_shrink) · scale_old)`` for tasks ``seen`` in the batch,
    ``scale_old`` for the others, and ``sigma_new`` outright where ``fresh`` (statistics just
    set from a first batch). ``max_shrink = 1`` gives σ itself.

    Why: σ is the spread of a task's value targets. Once a task is solved its returns become
    nearly constant and σ collapses with their spread (CartPole: 34 → 5.5 within one run),
    but the value error left by a shared torso that keeps moving for the other tasks does not
    shrink with it. The normalised value error then grows as 1/σ and its gradient into the
    torso as 1/σ², so the noise of a solved task's value comes to steer the shared network
    and the task is forgotten. Growth must be followed at once (returns can rise 100x in a
    run); a falling spread need not be.
    """
    k = _check_vector("slow_shrink", "sigma_new", sigma_new)
    _check_vector("slow_shrink", "scale_old", scale_old, k)
    if not 0.0 <= max_shrink <= 1.0:
        raise _fail("slow_shrink", f"max_shrink must be in [0, 1], got {max_shrink}")
    scale_old = scale_old.to(sigma_new)
    held = torch.maximum(sigma_new, (1.0 - max_shrink) * scale_old)
    out = torch.where(seen.to(sigma_new.device), held, scale_old)
    if fresh is not None:
        out = torch.where(fresh.to(sigma_new.device), sigma_new, out)
    return out


def preserve_outputs(
    weight: torch.Tensor,
    bias: torch.Tensor,
    mu_old: torch.Tensor,
    sigma_old: torch.Tensor,
    mu_new: torch.Tensor,
    sigma_new: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rescale a per-task linear value head so its unnormalised outputs do not change.

    With row i of ``weight`` ``[K, H]`` and ``bias`` ``[K]`` giving n_i(h) = w_i·h + b_i,
    returns w_i' = (σ_old/σ_new) w_i and b_i' = (σ_old b_i + μ_old − μ_new)/σ_new, so that
    σ_new n_i'(h) + μ_new = σ_old n_i(h) + μ_old for every h (van Hasselt et al. 2016, Alg. 1).
    Computed in the wider of the head's and the statistics' dtypes, returned in the head's.
    The caller copies the results into the parameters under ``torch.no_grad()``.
    """
    fn = "preserve_outputs"
    if not isinstance(weight, torch.Tensor) or weight.ndim != 2:
        got = tuple(weight.shape) if isinstance(weight, torch.Tensor) else type(weight).__name__
        raise _fail(fn, f"weight must be [K, H] (row i = task i's value head), got {got}")
    k = weight.shape[0]
    for name, x in (
        ("bias", bias),
        ("mu_old", mu_old),
        ("sigma_old", sigma_old),
        ("mu_new", mu_new),
        ("sigma_new", sigma_new),
    ):
        _check_vector(fn, name, x, k)
    dt = torch.promote_types(torch.promote_types(weight.dtype, bias.dtype), sigma_old.dtype)
    with torch.no_grad():
        s_old, s_new = sigma_old.to(dt), sigma_new.to(dt)
        new_weight = weight.to(dt) * (s_old / s_new).unsqueeze(1)
        new_bias = (s_old * bias.to(dt) + mu_old.to(dt) - mu_new.to(dt)) / s_new
    return new_weight.to(weight.dtype), new_bias.to(bias.dtype)


def _gather(fn: str, x: torch.Tensor, mu: torch.Tensor, sigma_: torch.Tensor, task_ids):
    k = _check_vector(fn, "mu", mu)
    _check_vector(fn, "sigma", sigma_, k)
    ids = _check_task_ids(fn, task_ids, x.shape, k)
    return mu.to(x.dtype)[ids], sigma_.to(x.dtype)[ids]


def normalize(
    x: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor, task_ids: torch.Tensor
) -> torch.Tensor:
    """(x − μ_i)/σ_i with i = ``task_ids`` (broadcastable to ``x``); result in ``x``'s dtype."""
    m, s = _gather("normalize", x, mu, sigma, task_ids)
    return (x - m) / s


def unnormalize(
    n: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor, task_ids: torch.Tensor
) -> torch.Tensor:
    """σ_i n + μ_i with i = ``task_ids`` (broadcastable to ``n``); result in ``n``'s dtype."""
    m, s = _gather("unnormalize", n, mu, sigma, task_ids)
    return s * n + m


def popart_step(
    mu: torch.Tensor,
    nu: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    moments: Moments,
    beta: float | torch.Tensor,
    sigma_min: float = 1e-4,
    sigma_max: float = 1e6,
    first: torch.Tensor | None = None,
) -> PopArtStep:
    """One PopArt statistics update: moments → new μ, ν → new σ → rescaled value head.

    ``moments`` are those of the whole (all-reduced) batch of unnormalised targets. Order of a
    learner step (Hessel et al. 2019): compute targets with the old statistics, call this, copy
    ``weight``/``bias`` into the head, then take the gradient step on targets normalised with
    the new statistics.

    ``first`` (bool ``[K]``) marks tasks whose statistics are still the arbitrary prior (μ = 0,
    ν = 1, in reward units): for them the batch's moments are taken outright (β = 1) and the
    head is *not* rescaled, so its untrained normalised outputs are kept instead of its random
    unnormalised ones. Without it the first ~1/β updates depend on the task's reward scale.
    """
    if first is not None:
        first = first.to(mu.device) & (moments.count.to(mu.device) > 0)
        beta = torch.where(first, 1.0, torch.as_tensor(beta, dtype=mu.dtype, device=mu.device))
    sigma_old = sigma(mu, nu, sigma_min, sigma_max)
    mu_new, nu_new = update_stats(mu, nu, moments, beta)
    sigma_new = sigma(mu_new, nu_new, sigma_min, sigma_max)
    new_weight, new_bias = preserve_outputs(weight, bias, mu, sigma_old, mu_new, sigma_new)
    if first is not None:
        new_weight = torch.where(first.to(weight.device)[:, None], weight, new_weight)
        new_bias = torch.where(first.to(bias.device), bias, new_bias)
    return PopArtStep(mu=mu_new, nu=nu_new, sigma=sigma_new, weight=new_weight, bias=new_bias)
