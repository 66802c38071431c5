"""The pre-flight check of sharded replay's memory (``replay.shards``): each node's shards
against the node's memory, before any shard starts.

The shards go where :class:`~mtrl.replay.sharded.ShardGroup` will put them (shard ``i`` of
each task on the ``i mod hosts``-th host, :mod:`mtrl.replay.shard_math`), each holding its
share of every task it serves; a task's replay takes what the rule's registration says
(:func:`~mtrl.train.preflight.replay_need`, the same estimate as the learner's own replay).
A node whose shards would hold more than Ray gives it as ``memory`` — or, for the node this
process runs on, more than the machine has available — refuses the run with one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mtrl.actors.ray_cluster import live_nodes_by_id, this_node
from mtrl.config import ExperimentConfig
from mtrl.replay.shard_math import bytes_per_node, shard_hosts
from mtrl.train.memory_estimate import gb
from mtrl.train.preflight import SKIP_ENV, MemoryCheckError, host_available, replay_need, spaces_of

if TYPE_CHECKING:
    from mtrl.plugins.registry import AlgorithmRegistry

__all__ = ["check_shard_memory", "shard_memory_problem"]


def shard_memory_problem(
    per_node: Mapping[str, int], room: Mapping[str, int | None], capacity: int, count: int
) -> str | None:
    """The one line refusing the run when some node's shards (``per_node`` bytes) exceed its
    ``room`` (None: unknown, not checked) — the node most over, with how many others are —
    naming what to change; None when they fit."""
    over = [
        (need - have, node, need, have)
        for node, need in per_node.items()
        if (have := room.get(node)) is not None and need > have
    ]
    if not over:
        return None
    _, node, need, have = max(over)
    others = f" (and {len(over) - 1} other nodes)" if len(over) > 1 else ""
    return (
        f"replay.shards: the replay shards on node {node[:12]}{others} would hold {gb(need)} "
        f"(replay.capacity {capacity} per task over replay.shards.count {count}), more than "
        f"the {gb(have)} of memory it has; lower replay.capacity, or spread the shards over "
        "more nodes (a larger replay.shards.count, more nodes with CPUs)"
    )


def check_shard_memory(
    cfg: ExperimentConfig,
    specs: Sequence[Any],
    algorithms: AlgorithmRegistry | None = None,
) -> dict[str, int]:
    """Raise :class:`~mtrl.train.preflight.MemoryCheckError` when a node's shards would not fit
    (Ray connected: its nodes are asked); returns the bytes per node. Nothing without
    ``replay.shards``, for a rule without a replay, or with ``MTRL_NO_MEMORY_CHECK=1``."""
    shards = cfg.replay.shards
    need = replay_need(cfg, algorithms) if shards is not None else None
    if shards is None or need is None or os.environ.get(SKIP_ENV, "") not in ("", "0"):
        return {}
    task_bytes = [need.nbytes(obs, act) for obs, act in spaces_of(cfg, specs)]
    nodes = live_nodes_by_id()
    hosts = shard_hosts(nodes, shards.num_cpus, shards.resources)
    per_node = bytes_per_node(task_bytes, shards.count, hosts)
    here = this_node()
    room: dict[str, int | None] = {}
    for node in hosts:
        ray_memory = nodes[node].get("memory")
        known = [int(ray_memory)] if ray_memory else []
        if node == here and (host := host_available()) is not None:
            known.append(host)
        room[node] = min(known) if known else None
    line = shard_memory_problem(per_node, room, int(need.blame.value), shards.count)
    if line is not None:
        raise MemoryCheckError(line, problems=[line])
    return per_node
