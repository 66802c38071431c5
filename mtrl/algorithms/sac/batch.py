"""A SAC gradient step's batch: transitions drawn from each ready task's replay and grouped by
action kind and size, so the learner's distribution and loss math runs once per group
(:class:`Group`) rather than once per task."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from mtrl.learner.device import to_device
from mtrl.learner.model import Obs, obs_to_tensor
from mtrl.replay import TaskReplay

__all__ = ["Group", "draw_groups", "group_key"]


@dataclass
class Group:
    """The tasks of one action kind and size in a gradient step's batch, their samples
    concatenated task by task (``rows`` names each row's task), on the learner's device: the
    distribution and loss math runs once over all of them instead of once per task (a step
    of MT10's ten tasks is hundreds of small tensor calls fewer)."""

    box: bool
    tasks: list[int]
    sizes: list[int]
    obs: list[Obs]  # per task [n_k, *obs]
    next_obs: list[Obs]
    actions: torch.Tensor  # [n, size] raw actions (Box) or [n] indices (Discrete)
    rewards: torch.Tensor  # [n]
    terminated: torch.Tensor  # [n]
    weights: torch.Tensor  # [n] importance weights
    rows: torch.Tensor  # [n] long: the task of each row
    indices: list[np.ndarray]  # per task: the replay items drawn


def group_key(space: spaces.Space) -> tuple[bool, int]:
    """Tasks whose rows can be concatenated: Box actions of one size, or Discrete of one n."""
    if isinstance(space, spaces.Box):
        return True, int(np.prod(space.shape))
    return False, int(space.n)


def _joined(batches: Sequence[Any], field: str, device: torch.device) -> torch.Tensor:
    """One field of several tasks' sampled batches as one tensor on ``device``."""
    return to_device(np.concatenate([getattr(b, field) for b in batches]), device)


def _cat_obs(parts: Sequence[Any], device: torch.device) -> list[Obs]:
    """Per-task observations as tensors on ``device``: arrays of one shape and dtype are
    joined and moved in one call, then split into views."""
    first = parts[0]
    if all(
        isinstance(p, np.ndarray) and p.shape[1:] == first.shape[1:] and p.dtype == first.dtype
        for p in parts
    ):
        joined = obs_to_tensor(np.concatenate(parts), device)
        return list(joined.split([len(p) for p in parts]))
    return [obs_to_tensor(p, device) for p in parts]


def draw_groups(
    replays: Sequence[TaskReplay],
    keys: Sequence[tuple[bool, int]],
    ready: Sequence[int],
    counts: Sequence[int],
    rng: np.random.Generator,
    device: torch.device,
) -> list[Group]:
    """``counts[i]`` transitions from the replay of task ``ready[i]``, grouped by ``keys``
    (:func:`group_key` of each task) and moved to ``device``: everything is assembled on the
    host and moved without blocking it (:func:`~mtrl.learner.device.to_device`), since each
    blocking copy to a GPU would wait for the previous gradient step to finish."""
    drawn: dict[tuple[bool, int], list[tuple[int, Any, np.ndarray, np.ndarray]]] = {}
    for task, n in zip(ready, counts, strict=True):
        if n:
            tb, indices, weights = replays[task].sample(int(n), rng)
            drawn.setdefault(keys[task], []).append((task, tb, indices, weights))
    dev = device
    groups = []
    for (box, _), members in drawn.items():
        tasks = [m[0] for m in members]
        sizes = [len(m[2]) for m in members]
        batches = [m[1] for m in members]
        actions = np.concatenate([b.actions for b in batches])

        groups.append(
            Group(
                box=box,
                tasks=tasks,
                sizes=sizes,
                obs=_cat_obs([b.obs for b in batches], dev),
                next_obs=_cat_obs([b.next_obs for b in batches], dev),
                actions=to_device(actions.reshape(len(actions), -1) if box else actions, dev),
                rewards=_joined(batches, "rewards", dev),
                terminated=_joined(batches, "terminated", dev),
                weights=to_device(np.concatenate([m[3] for m in members]).astype(np.float32), dev),
                rows=to_device(np.repeat(np.asarray(tasks, np.int64), sizes), dev),
                indices=[m[2] for m in members],
            )
        )
    return groups
