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
shares all of it.
"""

from __future__ import annotations

import torch
from torch import nn

from mtrl.learner.encoders import activation as make_activation
from mtrl.learner.encoders import ortho_init

__all__ = ["ResidualBlock", "ResidualTorso"]


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
