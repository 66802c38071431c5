"""The recurrent core: an LSTM or GRU cell run over time, with its state reset at episode starts.

The state of a batch of ``N`` env copies is ONE float tensor ``[N, S]`` (LSTM: ``h`` and ``c``
side by side, ``S = 2H``; GRU: ``h``, ``S = H``), so an unroll can carry it as one declared
array and the inference server can batch, split and store it without knowing the cell.

**Where the state resets.** mtrl's batch envs auto-reset on the *next* step
(:mod:`mtrl.plugins.batch_env`): if step ``t`` ends an episode, observation row ``t + 1`` is
that episode's *final* observation (a truncated episode's target bootstraps from its value,
so it is still read with the episode's memory), step ``t + 1`` is a reset step (the unroll
marks it ``valid = False``, its action is ignored) and row ``t + 2`` is the first observation
of the next episode. So the state is zeroed right *before a row that starts an episode*: row
``s`` does when step ``s - 1`` was a reset step, ``resets[s] = ~valid[s - 1]``
(:func:`sequence_resets`). Actors do the same thing one step at a time: after acting on a
reset step they zero the copy's state, which is then the state the next row starts from;
an unroll's initial state is whatever was stored when it began (zeros at the start of a run).

:meth:`RecurrentCore.forward` (a sequence) and :meth:`RecurrentCore.step` (one row) call the
same cell on the same ``[N, ·]`` shapes, so the sequence equals stepping row by row bit for bit.
"""

from __future__ import annotations

import torch
from torch import nn

from mtrl.config.core import CoreConfig

__all__ = ["RecurrentCore", "reset_state", "sequence_resets", "state_size"]


def state_size(cfg: CoreConfig) -> int:
    """Floats of state per env copy: ``2H`` for an LSTM (``h``, ``c``), ``H`` for a GRU."""
    return 2 * cfg.hidden if cfg.kind == "lstm" else cfg.hidden


def reset_state(state: torch.Tensor, reset: torch.Tensor) -> torch.Tensor:
    """``state [N, S]`` with the rows where ``reset [N]`` (bool) is true set to exact zeros."""
    return torch.where(reset.unsqueeze(-1), state.new_zeros(()), state)


def sequence_resets(valid: torch.Tensor) -> torch.Tensor:
    """Rows ``[T + 1, N]`` of an unroll that start an episode, from its ``valid [T, N]``.

    Row 0 is never reset here (the unroll's initial state already is what row 0 needs); row
    ``s >= 1`` is when step ``s - 1`` was a reset step (see the module docstring).
    """
    first = torch.zeros_like(valid[:1], dtype=torch.bool)
    return torch.cat([first, ~valid.to(torch.bool)])


class RecurrentCore(nn.Module):
    """``kind`` cell from ``input_dim`` features to ``hidden`` outputs, over time with resets."""

    def __init__(self, cfg: CoreConfig, input_dim: int) -> None:
        super().__init__()
        self.kind = cfg.kind
        self.hidden = cfg.hidden
        self.state_size = state_size(cfg)
        """Floats of state per env copy."""
        if cfg.kind == "lstm":
            self.cell: nn.Module = nn.LSTMCell(input_dim, cfg.hidden)
            with torch.no_grad():  # forget gate open at the start: memory is kept by default
                self.cell.bias_ih[cfg.hidden : 2 * cfg.hidden].fill_(1.0)
                self.cell.bias_hh[cfg.hidden : 2 * cfg.hidden].zero_()
        else:
            self.cell = nn.GRUCell(input_dim, cfg.hidden)

    def step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One row: features ``x [N, I]`` and the state ``[N, S]`` → output ``[N, H]``, state."""
        state = state.to(x.dtype)
        if self.kind == "lstm":
            h, c = self.cell(x, (state[:, : self.hidden], state[:, self.hidden :]))
            return h, torch.cat([h, c], dim=-1)
        h = self.cell(x, state)
        return h, h

    def forward(
        self, x: torch.Tensor, state: torch.Tensor, resets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Features ``x [L, N, I]`` from ``state [N, S]``; ``resets [L, N]`` zeroes the state
        before the rows that start an episode. Returns outputs ``[L, N, H]`` and the state
        after the last row."""
        if (
            x.ndim != 3
            or resets.shape != x.shape[:2]
            or state.shape != (x.shape[1], self.state_size)
        ):
            raise ValueError(
                f"recurrent core: x {tuple(x.shape)}, state {tuple(state.shape)} and resets "
                f"{tuple(resets.shape)} must be [L, N, I], [N, {self.state_size}] and [L, N]"
            )
        outs = []
        for t in range(x.shape[0]):
            out, state = self.step(x[t], reset_state(state, resets[t]))
            outs.append(out)
        return torch.stack(outs), state

    def extra_repr(self) -> str:
        return f"kind={self.kind}, hidden={self.hidden}"
