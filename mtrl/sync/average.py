"""The replicas' mean of their :class:`~mtrl.sync.replica_state.ReplicaState`s in one
collective: what ``local_sgd`` and ``diloco`` (:mod:`mtrl.sync.loose_sync`) do at each sync,
and gossip (:mod:`mtrl.sync.gossip`) at the end of the run."""

from __future__ import annotations

import torch.distributed as dist

from mtrl.sync.replica_state import ReplicaState

__all__ = ["average_replica_states"]


def average_replica_states(state: ReplicaState, world_size: int) -> ReplicaState:
    """Every replica's ``state`` made the replicas' mean (statistics averaged, seen flags
    OR-ed), in place: a collective every replica calls."""
    dist.all_reduce(state.params)
    state.params /= world_size
    dist.all_reduce(state.stats)
    state.stats /= world_size
    seen = state.seen.float()
    dist.all_reduce(seen, op=dist.ReduceOp.MAX)
    state.seen = seen > 0
    return state
