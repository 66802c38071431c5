"""SAC's stacked gradient step captured as one CUDA graph and replayed.

On a GPU each of the step's few hundred kernels is small (MT10's matmuls are tens of rows), so
the step is paced by launching them from Python — an H200 sat idle most of a SAC step
(docs/BENCHMARKS.md). A CUDA graph records the step's kernels once and replays all of them with
one launch. What the recording needs, the stacked step already has: one padded input block of a
fixed shape, no host synchronisation, optimisers whose step count lives on the device
(``capturable``). What changes from step to step is data: the block is copied into the graph's
own input tensor before each replay, the noise comes from the graph-safe generator, and the
parameters, optimiser moments and diagnostics are updated in place.

The rows per task of each group's block are fixed when the graph is recorded (a quarter above
the largest count seen, rounded up to 8); a step that needs more runs eagerly and the graph is
recorded again with the larger block. Before the recording,
:data:`WARMUP` steps run eagerly on a side stream (real steps, each on its own batch), so that
every lazily made buffer exists before the capture starts. Should the recording fail (a
kernel that cannot be captured, on some device or version), the run says so in one line and
steps eagerly from then on: nothing runs while a graph records, so no step is lost or repeated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    if learner.cfg.replay.prioritized:
        return "prioritized replay (its priorities go back to the host every step)"
    if learner.combining:
        return "combined task gradients (their solvers run on the host)"
    return None


class GraphedStep:
    """Runs a stacked step's device work as a replayed CUDA graph: ``step(flat, rows) ->
    (losses, tds)`` on the device copy of a host batch's flat buffer laid out with ``rows``
    per task in each group (:meth:`~mtrl.algorithms.sac.stacked_step.StackedSac.step_on_flat`).
    """

    def __init__(
        self,
        step: Callable[[torch.Tensor, Sequence[int]], tuple[torch.Tensor, Any]],
        device: torch.device,
        groups: int,
    ) -> None:
        self.step = step
        self.device = device
        self.rows = [1] * groups
        """Rows per task of each group's block in the graph's input (what to draw)."""
        self._graph: torch.cuda.CUDAGraph | None = None
        self._flat: torch.Tensor | None = None
        self._out: torch.Tensor | None = None
        self._warm = 0
        self.recordings = 0
        self.failed: str | None = None
        """Why recording failed, if it did; every step then runs eagerly."""

    def run(self, host: Any) -> torch.Tensor:
        """One gradient step on ``host`` (a :class:`~mtrl.algorithms.sac.stacked_batch.
        HostBatch` drawn with at least :attr:`rows`): the three losses."""
        if self.failed is not None:
            return self._eager(host)
        if list(host.rows) != self.rows:  # a group needs more rows: record again, larger
            grown = zip(self.rows, host.rows, strict=True)
            self.rows = [max(r, -(-int(h * 1.25) // 8) * 8) for r, h in grown]
            self._graph, self._warm, self._flat = None, 0, None
            return self._eager(host)
        flat = torch.from_numpy(host.flat).pin_memory()
        if self._flat is None:
            self._flat = torch.empty(flat.shape, device=self.device)
        self._flat.copy_(flat, non_blocking=True)
        if self._warm < WARMUP:  # eager, on a side stream, before recording
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                out, _ = self.step(self._flat, self.rows)
            torch.cuda.current_stream(self.device).wait_stream(side)
            self._warm += 1
            return out
        if self._graph is None:
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.current_stream(self.device)
            generator = torch.cuda.default_generators[stream.device_index]
            before = generator.clone_state()
            try:
                with torch.cuda.graph(graph):
                    self._out, _ = self.step(self._flat, self.rows)
            except RuntimeError as err:  # nothing ran while recording: step eagerly from here
                # A failed recording leaves its own stream current and the device's random
                # generator in recording mode (torch.cuda.graph does not undo either when the
                # recording's end fails): put both back, or every eager step after would fail.
                torch.cuda.set_stream(stream)
                generator.graphsafe_set_state(before)
                self.failed = f"{type(err).__name__}: {str(err).splitlines()[0]}"
                print(
                    f"SAC's gradient step could not be recorded as a CUDA graph "
                    f"({self.failed}); it runs eagerly",
                    flush=True,
                )
                return self._eager(host)
            self._graph = graph
            self.recordings += 1
        self._graph.replay()
        assert self._out is not None
        return self._out

    def _eager(self, host: Any) -> torch.Tensor:
        """A step of a batch laid out otherwise than the graph's, run eagerly."""
        flat = torch.from_numpy(host.flat).pin_memory().to(self.device, non_blocking=True)
        out, _ = self.step(flat, host.rows)
        return out
