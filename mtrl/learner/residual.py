"""A residual torso with layer norm (``learner.model.torso_block: residual``): BRO's BroNet.

High-capacity critics gain sample efficiency when the network is wider and deeper, but a plain
MLP of that size trains poorly. BRO (Nauman et al. 2024, "Bigger, Regularized, Optimistic:
scaling for compute and sample-efficient continuous control") keeps it trainable with layer
norm inside residual blocks: a stem ``Linear → LayerNorm → act`` to the torso's width ``w``,
then blocks ``x + LN(Linear(act(LN(Linear(x)))))`` (Dense → LN → act → Dense → LN, plus the
skip). SimBa (Lee et al. 2024) scales with residual blocks and layer norm too, normalising
before each branch instead. Each block's branch is normalised, so its size does not grow with
depth, and the skip passes the stem's features and their gradient through every block
unchanged.

:class:`ResidualTorso` is called as ``torso(x)``, like the plain MLP torso, and every task
shares all of it. :class:`ResidualTorsoStack` runs several members' torsos (SAC's twin critics)
as one, a batched call per layer.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from mtrl.learner.encoders import activation as make_activation
from mtrl.learner.encoders import ortho_init
from mtrl.learner.stacked import LinearStack

__all__ = ["LayerNormStack", "ResidualBlock", "ResidualTorso", "ResidualTorsoStack"]


class ResidualBlock(nn.Module):
    """``x + LN(Linear(act(LN(Linear(x)))))`` on ``[*B, width]``: the skip plus a normalised
    branch (:attr:`branch`)."""

    def __init__(self, width: int, activation: str) -> None:
        super().__init__()
        self.branch = nn.Sequential(
            ortho_init(nn.Linear(width, width)),
            nn.LayerNorm(width),
            make_activation(activation),
            ortho_init(nn.Linear(width, width)),
            nn.LayerNorm(width),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.branch(x)


class ResidualTorso(nn.Module):
    """A stem ``Linear(in_dim, width) → LayerNorm → act``, then ``blocks``
    :class:`ResidualBlock` of ``width``: ``[*B, in_dim]`` → ``[*B, width]``."""

    def __init__(self, in_dim: int, width: int, blocks: int, activation: str) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            ortho_init(nn.Linear(in_dim, width)), nn.LayerNorm(width), make_activation(activation)
        )
        self.blocks = nn.Sequential(*(ResidualBlock(width, activation) for _ in range(blocks)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.stem(x))


class LayerNormStack(nn.Module):
    """Same-shaped ``LayerNorm`` layers of several members as one ``[G, width]`` weight and
    bias, which *are* the members' storage (each member's parameters alias their row, as
    :class:`~mtrl.learner.stacked.LinearStack` does for ``Linear`` layers): ``x [G, n, width]``
    normalised over its last dim, then each member's scale and shift applied to its rows."""

    def __init__(self, members: Sequence[nn.LayerNorm]) -> None:
        super().__init__()
        shapes = {
            (tuple(m.normalized_shape), m.eps, m.weight is not None, m.bias is not None)
            for m in members
        }
        if len(shapes) != 1:
            raise ValueError(f"members of a LayerNormStack must share their shape: {shapes}")
        shape, self.eps, weighted, biased = shapes.pop()
        if len(shape) != 1 or not (weighted and biased):
            raise ValueError("a LayerNormStack's members normalise one dim, with scale and shift")
        self.width = shape[0]
        with torch.no_grad():
            self.weight = nn.Parameter(torch.stack([m.weight for m in members]))
            self.bias = nn.Parameter(torch.stack([m.bias for m in members]))
        for g, m in enumerate(members):
            m.weight = nn.Parameter(self.weight.data[g], m.weight.requires_grad)
            m.bias = nn.Parameter(self.bias.data[g], m.bias.requires_grad)

    def forward(self, x: torch.Tensor, frozen: bool = False) -> torch.Tensor:
        """``x [G, n, width]`` normalised per row and member (``frozen``: no gradient reaches
        the scales and shifts; it still flows to ``x``)."""
        w, b = (self.weight.detach(), self.bias.detach()) if frozen else (self.weight, self.bias)
        y = F.layer_norm(x, (self.width,), None, None, self.eps)
        return torch.addcmul(b.unsqueeze(1), y, w.unsqueeze(1))


class ResidualTorsoStack(nn.Module):
    """Several members' :class:`ResidualTorso` of one shape (SAC's twin critics) as stacks:
    ``x [G, n, in] → [G, n, width]``, one batched call per ``Linear`` and ``LayerNorm`` for
    every member's rows instead of one per member. The stacks own the weights and the members'
    modules alias them (:class:`~mtrl.learner.stacked.LinearStack`, :class:`LayerNormStack`),
    so each member still computes, checkpoints and resets as its own torso."""

    def __init__(self, torsos: Sequence[ResidualTorso]) -> None:
        super().__init__()
        if len({len(t.blocks) for t in torsos}) != 1:
            raise ValueError("the members of a ResidualTorsoStack need the same number of blocks")
        self.stem = _stack_layers([t.stem for t in torsos])
        self.blocks = nn.ModuleList(
            _stack_layers([t.blocks[i].branch for t in torsos])
            for i in range(len(torsos[0].blocks))
        )

    def forward(self, x: torch.Tensor, frozen: bool = False) -> torch.Tensor:
        """As :meth:`ResidualTorso.forward`, each member on its rows (``frozen``: no gradient
        reaches the stacks' parameters; it still flows to ``x``)."""
        x = _run(self.stem, x, frozen)
        for branch in self.blocks:
            x = x + _run(branch, x, frozen)
        return x


def _stack_layers(paths: Sequence[nn.Sequential]) -> nn.ModuleList:
    """The members' same-shaped ``Sequential`` paths as one: a stack per ``Linear`` and
    ``LayerNorm``, the first member's parameterless layers (activations) as they are."""
    out = nn.ModuleList()
    for layers in zip(*paths, strict=True):
        first = layers[0]
        if isinstance(first, nn.Linear):
            out.append(LinearStack([[m] for m in layers]))
        elif isinstance(first, nn.LayerNorm):
            out.append(LayerNormStack(layers))
        elif any(True for _ in first.parameters()):
            raise ValueError(f"a ResidualTorsoStack cannot stack {type(first).__name__}")
        else:
            out.append(first)
    return out


def _run(layers: nn.ModuleList, x: torch.Tensor, frozen: bool) -> torch.Tensor:
    for layer in layers:
        x = layer(x, frozen) if isinstance(layer, (LinearStack, LayerNormStack)) else layer(x)
    return x
