"""Task-conditioned torsos (``learner.model.torso_mixture``): expert MLPs mixed per task.

A plain torso is one MLP every task shares whole, so tasks that need different features pull
its weights in opposite directions. Here each row of the batch carries its task, whose learned
embedding weighs ``E`` expert MLPs:

- ``moe``: ``h = Σ_e softmax(W z_task)_e · f_e(x)`` (a task-gated mixture of experts, the
  shared representation of CARE, Sodhani et al. 2021, without its language context);
- ``moore``: the experts' outputs ``U = [f_1(x) … f_E(x)]`` ``[D, E]`` made orthonormal per
  row (:func:`orthonormal_columns`, Gram–Schmidt as a reduced QR), then
  ``h = tanh(U_orth · W z_task)`` (mixture of orthogonal experts, Hendawy et al. 2024,
  "Multi-Task Reinforcement Learning with Mixture of Orthogonal Experts", ICLR 2024).
"""

from __future__ import annotations

import torch
from torch import nn

from mtrl.learner.encoders import make_mlp

__all__ = ["MixtureTorso", "orthonormal_columns"]


def orthonormal_columns(u: torch.Tensor) -> torch.Tensor:
    """``[n, D, E]`` → columns made orthonormal per row, in order (Gram–Schmidt: the ``Q`` of a
    reduced QR factorisation, signs fixed so each column keeps its direction)."""
    q, r = torch.linalg.qr(u, mode="reduced")
    sign = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    return q * sign.unsqueeze(-2)


class MixtureTorso(nn.Module):
    """``E`` expert MLPs of the torso's widths, mixed by each row's task embedding.

    Called as ``torso(x, tasks)``: ``x`` ``[*B, in_dim]``, ``tasks`` ``[*B]`` (long) or one int
    for every row; returns ``[*B, widths[-1]]``.
    """

    def __init__(
        self,
        in_dim: int,
        widths: list[int],
        activation: str,
        num_tasks: int,
        kind: str,
        experts: int,
        embedding: int,
    ) -> None:
        super().__init__()
        if not widths:
            raise ValueError("a task-conditioned torso needs learner.model.torso widths")
        if kind == "moore" and experts > widths[-1]:
            raise ValueError(
                f"moore: {experts} experts cannot be orthonormal in {widths[-1]} dimensions"
            )
        self.kind = kind
        self.experts = nn.ModuleList(make_mlp(in_dim, widths, activation) for _ in range(experts))
        self.task_embedding = nn.Embedding(num_tasks, embedding)
        self.weights = nn.Linear(embedding, experts)

    def forward(self, x: torch.Tensor, tasks: torch.Tensor | int) -> torch.Tensor:
        lead = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1])
        if isinstance(tasks, int):
            tasks = torch.full((flat.shape[0],), tasks, dtype=torch.long, device=x.device)
        w = self.weights(self.task_embedding(tasks.reshape(-1)))  # [n, E]
        u = torch.stack([f(flat) for f in self.experts], dim=-1)  # [n, D, E]
        if self.kind == "moe":
            h = (u * torch.softmax(w, dim=-1).unsqueeze(-2)).sum(-1)
        else:
            h = torch.tanh((orthonormal_columns(u) * w.unsqueeze(-2)).sum(-1))
        return h.reshape(*lead, h.shape[-1])
