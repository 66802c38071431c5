"""Nodes of the simulated cluster, and reading a simulation's share timeline.

The simulator (:mod:`mtrl.scheduler.sim.simulator`) spreads its actor slots over nodes, each a
contiguous block of slots. A :class:`NodeEvent` takes nodes out of the cluster (their actors die
at once, their unrolls in flight are dropped and counted as failures of their tasks) or brings
them back (their slots wait, idle, for the next rebalance). In between, the scheduler's budget is
the live nodes' slots, resized exactly as :meth:`mtrl.scheduler.Rebalancer.set_slots` resizes
the real trainer's when a Ray cluster's nodes come and go.

The second half reads the cumulative per-task env steps the simulator samples every
``sample_every_s``: data shares over trailing windows, their error against the weights, and how
long after a node event the shares took to come back within a tolerance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from mtrl.scheduler.records import Budget


@dataclass(frozen=True)
class NodeEvent:
    """At ``time_s`` the ``nodes`` (indices) leave the cluster (``"lose"``) or (re)join it
    (``"join"``). Losing a lost node or joining a live one changes nothing."""

    time_s: float
    kind: Literal["lose", "join"]
    nodes: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.kind not in ("lose", "join"):
            raise ValueError(f"NodeEvent.kind must be 'lose' or 'join', got {self.kind!r}")
        if not (self.time_s >= 0 and np.isfinite(self.time_s)):
            raise ValueError(f"NodeEvent.time_s must be finite and >= 0, got {self.time_s}")
        if not self.nodes:
            raise ValueError("NodeEvent.nodes must name at least one node")


def node_slots(num_actors: int, nodes: int) -> list[range]:
    """The actor slots of each node: contiguous blocks whose sizes differ by at most one.

    Contiguous on purpose: the simulator's first split fills slots task by task, so a node's
    actors serve one or a few tasks (as Ray's default packing places actors started together)
    and losing it hits those tasks hard — the case a rebalance has to repair."""
    if not 1 <= nodes <= num_actors:
        raise ValueError(f"need 1 <= nodes <= num_actors, got {nodes} nodes, {num_actors} actors")
    edges = [i * num_actors // nodes for i in range(nodes + 1)]
    return [range(edges[i], edges[i + 1]) for i in range(nodes)]


def check_node_events(events: Sequence[NodeEvent], nodes: int) -> None:
    """Refuse events naming nodes the cluster does not have."""
    for ev in events:
        bad = [n for n in ev.nodes if not 0 <= n < nodes]
        if bad:
            raise ValueError(f"node event at {ev.time_s}s names nodes {bad}; have 0..{nodes - 1}")


def resized(budget: Budget, slots: int, tasks: int) -> Budget:
    """``budget`` with ``slots`` actor slots, never below the per-task floor — the rule of
    :meth:`mtrl.scheduler.Rebalancer.set_slots`, so the simulated policy sees what the real one
    would."""
    return replace(budget, slots=max(slots, budget.min_per_task * tasks, 1))


def window_shares(cumulative: np.ndarray, span: int) -> np.ndarray:
    """Per-task data shares over trailing windows of ``span`` samples.

    ``cumulative`` is (samples, tasks) env steps delivered up to each sample time; row ``i`` of
    the result covers samples ``i`` to ``i + span`` (a window without data gives zeros)."""
    cum = np.asarray(cumulative, dtype=float)
    if span < 1 or len(cum) <= span:
        return np.zeros((0, cum.shape[1] if cum.ndim == 2 else 0))
    steps = cum[span:] - cum[:-span]
    total = steps.sum(axis=1, keepdims=True)
    return np.divide(steps, total, out=np.zeros_like(steps), where=total > 0)


def share_errors(shares: np.ndarray, reference: Sequence[float]) -> np.ndarray:
    """Largest relative deviation of a task's share from its ``reference`` share (the weight
    share, or the shares a policy held before a node event), per window."""
    ref = np.asarray(reference, dtype=float)
    return np.abs(shares / ref - 1.0).max(axis=1) if len(shares) else np.zeros(0)


def recovery_s(
    window_end_s: Sequence[float],
    errors: Sequence[float],
    event_s: float,
    span_s: float,
    tol: float,
    until_s: float = float("inf"),
) -> float | None:
    """Seconds from ``event_s`` to the end of the first window wholly after it (windows are
    ``span_s`` long, ending at ``window_end_s``) whose error is within ``tol``; ``None`` when
    none before ``until_s`` (the next event). At least ``span_s`` by construction."""
    for end, err in zip(window_end_s, errors, strict=True):
        if end - span_s >= event_s - 1e-9 and end <= until_s + 1e-9 and err <= tol:
            return float(end - event_s)
    return None
