"""Task-conditioned torsos (``learner.model.torso_mixture``): expert MLPs mixed per task.

A plain torso is one MLP every task shares whole, so tasks that need different features pull
its weights in opposite directions. Here each row of the batch carries its task, whose learned
embedding weighs ``E`` expert MLPs:

- ``moe``: ``h = Σ_e softmax(W z_task)_e · f_e(x)`` (a task-gated mixture of experts, the
  shared representation of CARE, Sodhani et al. 2021, without its language context);
- ``moore``: the experts' outputs ``U = [f_1(x) … f_E(x)]`` ``[D, E]`` made orthonormal per
  row (:func:`orthonormal_columns`, Gram–Schmidt as a reduced QR), then
  ``h = tanh(U_orth · W z_task)`` (mixture of orthogonal experts, Hendawy et al. 2024,
  "Multi-Task Reinforcement Learning with Mixture of Orthogonal Experts", ICLR 2024);
- ``soft_modular``: each torso layer is ``E`` modules, and a routing network reading the row's
  state and task decides, layer by layer, how much of each module's output feeds each module
  of the next layer (soft modularization, Yang et al. 2020, "Multi-Task Reinforcement Learning
  with Soft Modularization", NeurIPS 2020): :class:`SoftModularTorso`.

:func:`make_torso` builds the torso a :class:`~mtrl.config.learner.ModelConfig` names (plain,
residual with ``torso_block: residual``, :mod:`mtrl.learner.residual`, or conditioned) for
every network that has one (the policy's model, SAC's critics), so the setting means the same
wherever a torso is built.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import nn

from mtrl.config.learner import ModelConfig
from mtrl.config.multitask import TorsoMixtureConfig
from mtrl.learner.encoders import activation as make_activation
from mtrl.learner.encoders import make_mlp
from mtrl.learner.residual import ResidualTorso

__all__ = [
    "MixtureTorso",
    "SoftModularTorso",
    "conditioned_torso",
    "make_torso",
    "orthonormal_columns",
    "row_tasks",
    "shared_torso_parameters",
]


def make_torso(cfg: ModelConfig, num_tasks: int) -> nn.Module:
    """The torso of ``cfg`` on ``cfg.encoder_dim`` inputs: the plain MLP of ``cfg.torso``, the
    residual one of ``cfg.torso_block: residual`` (:class:`~mtrl.learner.residual.
    ResidualTorso`), or with ``cfg.torso_mixture`` the task-conditioned one, called as
    ``torso(x, tasks)``."""
    if cfg.torso_block == "residual":
        return ResidualTorso(cfg.encoder_dim, cfg.torso[0], len(cfg.torso), cfg.activation)
    mix = cfg.torso_mixture
    if mix is None:
        return make_mlp(cfg.encoder_dim, cfg.torso, cfg.activation)
    return conditioned_torso(cfg.encoder_dim, list(cfg.torso), cfg.activation, num_tasks, mix)


def row_tasks(tasks: Sequence[int], rows: Sequence[int], device: torch.device) -> torch.Tensor:
    """Each row's task ``[sum(rows)]`` (long) for a torso input stacked from parts of
    ``rows[i]`` rows of task ``tasks[i]``, in order: built on the host and copied once, so a
    device never waits to learn the output's size."""
    counts = torch.tensor(rows, dtype=torch.long)
    return torch.repeat_interleave(torch.tensor(tasks, dtype=torch.long), counts).to(device)


def shared_torso_parameters(torso: nn.Module) -> list[nn.Parameter]:
    """The parameters of ``torso`` that every task's loss reaches: all but a conditioned
    torso's task embedding (each row of it belongs to one task), trainable ones only."""
    embedding = getattr(torso, "task_embedding", None)
    owned = {id(p) for p in embedding.parameters()} if embedding is not None else set()
    return [p for p in torso.parameters() if id(p) not in owned and p.requires_grad]


def conditioned_torso(
    in_dim: int, widths: list[int], activation: str, num_tasks: int, cfg: TorsoMixtureConfig
) -> nn.Module:
    """The task-conditioned torso ``cfg`` names, called as ``torso(x, tasks)``."""
    if cfg.kind == "soft_modular":
        return SoftModularTorso(
            in_dim, widths, activation, num_tasks, cfg.experts, cfg.task_embedding
        )
    return MixtureTorso(
        in_dim, widths, activation, num_tasks, cfg.kind, cfg.experts, cfg.task_embedding
    )


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
        flat, task_rows = _rows_and_tasks(x, tasks)
        w = self.weights(self.task_embedding(task_rows))  # [n, E]
        u = torch.stack([f(flat) for f in self.experts], dim=-1)  # [n, D, E]
        if self.kind == "moe":
            h = (u * torch.softmax(w, dim=-1).unsqueeze(-2)).sum(-1)
        else:
            h = torch.tanh((orthonormal_columns(u) * w.unsqueeze(-2)).sum(-1))
        return h.reshape(*lead, h.shape[-1])


def _rows_and_tasks(
    x: torch.Tensor, tasks: torch.Tensor | int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` flattened to rows ``[n, in]`` and each row's task ``[n]`` (long)."""
    flat = x.reshape(-1, x.shape[-1])
    if isinstance(tasks, int):
        return flat, torch.full((flat.shape[0],), tasks, dtype=torch.long, device=x.device)
    return flat, tasks.reshape(-1)


class ModuleLayer(nn.Module):
    """``E`` linear modules side by side, ``[n, E, in]`` → ``[n, E, out]`` in one batched
    product (module ``e`` reads row ``e`` of its input); initialised as the torso's MLP layers
    are (orthogonal, gain √2, zero bias)."""

    def __init__(self, modules: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(modules, in_dim, out_dim))
        self.bias = nn.Parameter(torch.zeros(modules, out_dim))
        for w in self.weight:
            nn.init.orthogonal_(w, math.sqrt(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("nei,eio->neo", x, self.weight) + self.bias


class SoftModularTorso(nn.Module):
    """Soft modularization (Yang et al. 2020): ``L`` layers (the torso's widths) of ``E``
    modules each, routed per row by the state and the task.

    The routing network embeds the state (a linear map of ``x``) and the task (a learned
    embedding) to the same width and multiplies them; from that product it outputs, for each
    pair of consecutive layers, an ``[E, E]`` matrix whose row ``j`` is a softmax over the
    lower layer's modules: module ``j`` of the upper layer reads that mixture of their
    outputs. Each later routing step also reads the earlier routing matrices (as the
    authors' code does), so routes are decided layer by layer. The first layer's modules all
    read ``x``; the torso's output is the sum of the last layer's module outputs. Called as
    ``torso(x, tasks)``: ``x`` ``[*B, in_dim]``, ``tasks`` ``[*B]`` (long) or one int;
    returns ``[*B, widths[-1]]``.
    """

    def __init__(
        self,
        in_dim: int,
        widths: list[int],
        activation: str,
        num_tasks: int,
        modules: int,
        embedding: int,
    ) -> None:
        super().__init__()
        if len(widths) < 2:
            raise ValueError(
                "soft_modular routes between layers: learner.model.torso needs at least two "
                f"widths, got {widths}"
            )
        self.modules_per_layer = modules
        dims = [in_dim, *widths]
        self.layers = nn.ModuleList(ModuleLayer(modules, a, b) for a, b in itertools.pairwise(dims))
        self.act = make_activation(activation)
        self.task_embedding = nn.Embedding(num_tasks, embedding)
        self.state_embedding = nn.Linear(in_dim, embedding)
        routes = len(widths) - 1
        square = modules * modules
        self.route_out = nn.ModuleList(nn.Linear(embedding, square) for _ in range(routes))
        # Routing step l > 0 reads the l routing matrices before it.
        self.route_cond = nn.ModuleList(
            nn.Linear(level * square, embedding) for level in range(1, routes)
        )

    def routes(self, x: torch.Tensor, tasks: torch.Tensor) -> list[torch.Tensor]:
        """The rows' routing matrices ``[n, E, E]``, one per pair of consecutive layers; row
        ``j`` of each is the softmax weighting of the lower layer's modules read by module
        ``j`` of the upper one."""
        e = self.modules_per_layer
        joint = self.state_embedding(x) * self.task_embedding(tasks)  # [n, D]
        out: list[torch.Tensor] = []
        flat: list[torch.Tensor] = []
        for level, project in enumerate(self.route_out):
            if level == 0:
                h = torch.relu(joint)
            else:
                h = torch.relu(self.route_cond[level - 1](torch.cat(flat, dim=-1)) * joint)
            route = project(h).view(-1, e, e).softmax(-1)
            out.append(route)
            flat.append(route.flatten(1))
        return out

    def forward(self, x: torch.Tensor, tasks: torch.Tensor | int) -> torch.Tensor:
        lead = x.shape[:-1]
        flat, task_rows = _rows_and_tasks(x, tasks)
        routes = self.routes(flat, task_rows)
        e = self.modules_per_layer
        h = self.act(self.layers[0](flat.unsqueeze(1).expand(-1, e, -1)))  # [n, E, w1]
        for route, layer in zip(routes, self.layers[1:], strict=True):
            h = self.act(layer(route @ h))
        out = h.sum(1)
        return out.reshape(*lead, out.shape[-1])
