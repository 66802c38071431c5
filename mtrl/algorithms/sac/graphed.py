"""SAC's stacked gradient step captured as one CUDA graph and replayed.

On a GPU each of the step's few hundred kernels is small (MT10's matmuls are tens of rows), so
the step is paced by launching them from Python — an H200 sat idle most of a SAC step
(docs/BENCHMARKS.md). A CUDA graph records the step's kernels once and replays all of them with
one launch. What the recording needs, the stacked step already has: one padded input block of a
fixed shape, no host synchronisation, optimisers whose step count lives on the device
(``capturable``). What changes from step to step is data: the block is copied into the graph's
own input tensor before each replay, the noise comes from the graph-safe generator, and the
parameters, optimiser moments and diagnostics are updated in place.

The block's rows per task are fixed when the graph is recorded (a quarter above the largest
count seen, rounded up to 8); a step that needs more records it again. Before the recording,
:data:`WARMUP` steps run eagerly on a side stream (real steps, each on its own batch), so that
every lazily made buffer exists before the capture starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["GRAPHED", "WARMUP", "GraphedStep", "why_not"]

GRAPHED = True
"""Capture the stacked step as a CUDA graph where :func:`why_not` allows (False: eager)."""

WARMUP = 3
"""Eager steps before each recording."""


def why_not(learner: Any) -> str | None:
    """Why ``learner``'s stacked step cannot be captured, or None where it can: on a CUDA
    device, one process, uniform replay, the tasks' gradients summed."""
    if not GRAPHED:
        return "switched off"
    if learner.device.type != "cuda":
        return f"the learner is on {learner.device.type}, not a CUDA GPU"
    if learner.distributed:
        return "data-parallel replicas (their all-reduces run between the step's parts)"
    if learner.sac.prioritized:
        return "prioritized replay (its priorities go back to the host every step)"
    if learner.combining:
        return "combined task gradients (their solvers run on the host)"
    return None


class GraphedStep:
    """Runs a stacked step's device work as a replayed CUDA graph: ``step(block, count) ->
    (losses, td)`` on the device tensors of a host batch's block and counts
    (:meth:`~mtrl.algorithms.sac.stacked_step.StackedSac.step_on_block`)."""

    def __init__(
        self,
        step: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
        device: torch.device,
    ) -> None:
        self.step = step
        self.device = device
        self.rows = 1
        """Rows per task of the block the graph reads (what :meth:`run` wants drawn)."""
        self._graph: torch.cuda.CUDAGraph | None = None
        self._block: torch.Tensor | None = None
        self._count: torch.Tensor | None = None
        self._out: torch.Tensor | None = None
        self._warm = 0
        self.recordings = 0

    def _inputs(self, host: Any) -> None:
        """Copy ``host``'s block and counts into the graph's input tensors."""
        block = torch.from_numpy(host.block).pin_memory()
        count = torch.from_numpy(host.count).pin_memory()
        if self._block is None or self._block.shape != block.shape:
            self._block = torch.empty(block.shape, device=self.device)
            self._count = torch.empty(count.shape, device=self.device)
        self._block.copy_(block, non_blocking=True)
        assert self._count is not None
        self._count.copy_(count, non_blocking=True)

    def _step(self) -> tuple[torch.Tensor, torch.Tensor]:
        assert self._block is not None and self._count is not None
        return self.step(self._block, self._count)

    def run(self, host: Any) -> torch.Tensor:
        """One gradient step on ``host`` (a :class:`HostBatch`): the three losses."""
        need = int(host.block.shape[1])
        if need > self.rows:  # record again for the larger block
            self.rows = -(-int(need * 1.25) // 8) * 8
            self._graph, self._warm = None, 0
            pad = host.block.shape[1]
            host.block = _pad_rows(host.block, self.rows) if pad < self.rows else host.block
        self._inputs(host)
        if self._warm < WARMUP:  # eager, on a side stream, before recording
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                out, _ = self._step()
            torch.cuda.current_stream(self.device).wait_stream(side)
            self._warm += 1
            return out
        if self._graph is None:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._out, _ = self._step()
            self._graph = graph
            self.recordings += 1
        self._graph.replay()
        assert self._out is not None
        return self._out


def _pad_rows(block: Any, rows: int) -> Any:
    """``block [K, m, C]`` with zero rows added up to ``rows`` (padding: mask 0)."""
    import numpy as np

    out = np.zeros((block.shape[0], rows, block.shape[2]), block.dtype)
    out[:, : block.shape[1]] = block
    return out
