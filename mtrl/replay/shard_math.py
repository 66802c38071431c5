"""The arithmetic of drawing one task's batch across replay shards: pure functions, no Ray.

**Proportional across shards.** Shard ``s`` holds items of masses ``m_i`` (``p_i^alpha`` for
prioritized replay, 1 for uniform) summing to ``M_s``; the whole replay's total is
``M = sum_s M_s``. A batch of ``n`` is split over the shards multinomially with probabilities
``M_s / M`` (:func:`split_by_mass`), and each shard draws its share in proportion to its own
masses (stratified, :meth:`~mtrl.replay.sum_tree.SumTree.sample`). One row then lands on item
``i`` of shard ``s`` with probability ``(M_s / M) * (m_i / M_s) = m_i / M``: exactly the
unsharded replay's ``P(i)``, whatever the number of shards.

**Importance weights** are the unsharded sampler's (:class:`~mtrl.replay.samplers.
PrioritizedSampler`, ``normalise="buffer"``): ``(m_min / m_i)^beta`` with ``m_min`` the
smallest positive mass over *all* shards (:func:`importance_weights`), so a shard's own minimum
never sets the scale.

**Indices.** The learner sees one index space per task: item ``j`` of shard ``s`` is
``s * per_shard + j`` (:func:`encode`, :func:`decode`), so priority updates find their shard.

**Placement.** Shards go beside the actors: on the nodes that can run actors and offer what a
shard asks (:func:`shard_hosts`), shard ``i`` of a task on host ``i mod hosts`` (node ids
sorted: :func:`host_of`), so with at least as many shards as hosts every such node has one of
every task and its actors write there; :func:`bytes_per_node` is what each node then holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = [
    "bytes_per_node",
    "decode",
    "encode",
    "host_of",
    "importance_weights",
    "shard_hosts",
    "split_by_mass",
]


def split_by_mass(masses: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """How many of ``n`` draws each shard makes: multinomial with probabilities ``masses /
    masses.sum()`` (int64, summing to ``n``; a shard of zero mass draws none)."""
    masses = np.asarray(masses, np.float64)
    if masses.ndim != 1 or (masses < 0).any() or not np.isfinite(masses).all():
        raise ValueError(f"shard masses must be a finite non-negative vector, got {masses}")
    total = masses.sum()
    if not total > 0:
        raise ValueError("cannot sample: no shard holds a sampleable item yet")
    return rng.multinomial(n, masses / total).astype(np.int64)


def importance_weights(masses: np.ndarray, smallest: float, beta: float) -> np.ndarray:
    """``(smallest / masses)^beta`` as float32: the drawn items' masses against the smallest
    positive mass of the whole replay (1 for every item of a uniform replay)."""
    return ((smallest / np.asarray(masses, np.float64)) ** beta).astype(np.float32)


def encode(shard: np.ndarray | int, local: np.ndarray, per_shard: int) -> np.ndarray:
    """Global indices of items ``local`` of ``shard`` (each shard addresses ``per_shard``)."""
    return np.asarray(shard, np.int64) * per_shard + np.asarray(local, np.int64)


def decode(indices: np.ndarray, per_shard: int) -> tuple[np.ndarray, np.ndarray]:
    """(shard, local index) of each global index."""
    return np.divmod(np.asarray(indices, np.int64), per_shard)


def shard_hosts(
    nodes: Mapping[str, Mapping[str, float]], num_cpus: float, resources: Mapping[str, float]
) -> list[str]:
    """The ids (sorted) of the ``nodes`` (id -> Ray resources) where shards go: those with
    CPUs (where actors run: a head node offering none is left out) and at least ``num_cpus``
    of them and of every custom resource in ``resources``."""
    return sorted(
        node
        for node, have in nodes.items()
        if have.get("CPU", 0.0) > 0
        and have.get("CPU", 0.0) >= num_cpus
        and all(have.get(k, 0.0) >= v for k, v in resources.items())
    )


def host_of(index: int, hosts: Sequence[str]) -> str | None:
    """The host of a task's shard number ``index``: ``hosts[index mod len(hosts)]`` (None
    without hosts: Ray spreads it)."""
    return hosts[index % len(hosts)] if hosts else None


def bytes_per_node(task_bytes: Sequence[int], count: int, hosts: Sequence[str]) -> dict[str, int]:
    """Replay bytes each host holds: each task's ``task_bytes`` split evenly over its
    ``count`` shards, shard ``i`` on :func:`host_of` ``i`` (``layout: mixed`` or
    ``per_task`` alike: shard ``i`` of every task is on the same host)."""
    out: dict[str, int] = dict.fromkeys(hosts, 0)
    if not hosts:
        return out
    for nbytes in task_bytes:
        part = -(-int(nbytes) // count)
        for i in range(count):
            node = host_of(i, hosts)
            assert node is not None
            out[node] += part
    return out
