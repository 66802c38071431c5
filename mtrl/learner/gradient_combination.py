"""Combining per-task gradients of the shared parameters into one update direction (pure
functions over a ``[K, P]`` matrix: row ``k`` is task ``k``'s gradient of its share of the
batch's loss, so the plain gradient is the rows' sum).

- :func:`pcgrad` — gradient surgery (Yu et al. 2020, "Gradient Surgery for Multi-Task
  Learning", Algorithm 1): each task's gradient, in turn against every other task's in a
  random order, loses its projection on the other where the two conflict (negative dot
  product); the projected gradients are summed.
- :func:`cagrad` — conflict-averse gradient descent (Liu et al. 2021, "Conflict-Averse
  Gradient Descent for Multi-task Learning", Algorithm 1, as the authors' code computes it):
  with ``g0`` the mean gradient and ``w`` on the simplex minimising
  ``g_w·g0 + c·|g0|·|g_w|`` (``g_w = Σ w_k g_k``), the update is
  ``(g0 + c·|g0| / |g_w| · g_w) / (1 + c²)``; returned times ``K`` so that it has the sum's
  scale (``c = 0`` gives exactly the sum).

Rows of tasks absent from a batch are zero; they take no part (a zero row conflicts with
nothing, and CAGrad is solved over the present tasks only).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["cagrad", "cagrad_weights", "combine", "pcgrad"]

_EPS = 1e-12


def pcgrad(grads: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """PCGrad's update ``[P]`` from per-task gradients ``[K, P]`` (the other tasks are visited
    in one random order per task, drawn from ``generator``)."""
    k = grads.shape[0]
    g = grads.double()
    sq = (g * g).sum(dim=1)
    out = g.clone()
    for i in range(k):
        order = torch.randperm(k, generator=generator).tolist()
        for j in order:
            if j == i or sq[j] <= _EPS:
                continue
            dot = torch.dot(out[i], g[j])
            if dot < 0:
                out[i] -= (dot / sq[j]) * g[j]
    return out.sum(dim=0).to(grads.dtype)


def cagrad_weights(gram: torch.Tensor, c: float) -> torch.Tensor:
    """The simplex weights ``w`` ``[K]`` minimising ``w·G·(1/K) + c·|g0|·sqrt(w·G·w)`` for a
    Gram matrix ``G = g gᵀ`` ``[K, K]``: the authors' solver (SciPy's SLSQP from the uniform
    weights, bounds ``[0, 1]``, weights summing to 1), given the objective's gradient."""
    from scipy.optimize import minimize  # only CAGrad needs SciPy

    a = gram.detach().double().cpu().numpy()
    k = a.shape[0]
    # The minimiser does not change with the gradients' scale; the solver's tolerances do.
    a = a / max(float(np.trace(a)) / k, 1e-300)
    b = np.full(k, 1.0 / k)
    ab = a @ b
    scale = c * float(np.sqrt(max(b @ ab, 0.0))) + 1e-8

    def objective(w: np.ndarray) -> float:
        return float(w @ ab + scale * np.sqrt(w @ a @ w + 1e-8))

    def gradient(w: np.ndarray) -> np.ndarray:
        aw = a @ w
        return ab + scale * aw / np.sqrt(w @ aw + 1e-8)

    res = minimize(
        objective,
        b.copy(),
        jac=gradient,
        bounds=[(0.0, 1.0)] * k,
        constraints=({"type": "eq", "fun": lambda w: 1.0 - w.sum(), "jac": lambda w: -np.ones(k)},),
        method="SLSQP",
        options={"ftol": 1e-12, "maxiter": 500},
    )
    return torch.as_tensor(res.x, dtype=gram.dtype, device=gram.device)


def cagrad(grads: torch.Tensor, c: float) -> torch.Tensor:
    """CAGrad's update ``[P]`` from per-task gradients ``[K, P]``, on the sum's scale."""
    present = (grads != 0).any(dim=1)
    g = grads[present].double()
    k = g.shape[0]
    if k == 0:
        return torch.zeros(grads.shape[1], dtype=grads.dtype, device=grads.device)
    g0 = g.mean(dim=0)
    if k == 1 or c == 0:
        return (g0 * k).to(grads.dtype)
    gram = g @ g.T
    w = cagrad_weights(gram, c)
    gw = w @ g
    g0_norm = torch.sqrt((g0 * g0).sum())
    lam = c * g0_norm / (torch.sqrt((gw * gw).sum()) + 1e-8)
    d = (g0 + lam * gw) / (1.0 + c * c)
    return (d * k).to(grads.dtype)


def combine(
    how: str, grads: torch.Tensor, c: float = 0.4, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``learner.multitask.gradients``'s update ``[P]`` from per-task gradients ``[K, P]``."""
    if how == "sum":
        return grads.sum(dim=0)
    if how == "pcgrad":
        return pcgrad(grads, generator)
    if how == "cagrad":
        return cagrad(grads, c)
    raise ValueError(f"unknown gradient combination {how!r}: use sum, pcgrad or cagrad")
