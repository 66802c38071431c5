"""Per-task replay storage: a ring of unroll *segments* in preallocated numpy memory.

**Layout.** An unroll of ``T`` steps of ``B`` env copies (:class:`~mtrl.actors.unroll.
UnrollBuffer`) is cut into ``B`` segments, one per env copy: ``T`` steps with their ``T + 1``
observation rows. The ring holds ``S`` segments; each field is one array with the segment as
its leading axis (``obs [S, T + 1, *obs]``, ``actions [S, T, *action]``, ``rewards``,
``terminated``, ``truncated``, ``valid``, ``behaviour_logp``, ``versions [S, T]`` and, for
recurrent cores, ``core_state [S, state]``). Shapes and dtypes come from the task's spaces
exactly as the unroll's do (:func:`mtrl.actors.unroll.unroll_fields`); Dict and Tuple
observations keep one array per leaf.

**Next observations by index.** Each observation is stored once per step; step ``t`` of
segment ``s`` reads ``obs[s, t]`` and ``obs[s, t + 1]``. A segment is written and overwritten
whole, so that pair always belongs to the same unroll, also across the ring's wrap; the only
duplicate is each segment's last row (the next unroll's first), ``1/T`` of the observations.

**Episode ends.** By the batch-env contract (:mod:`mtrl.plugins.batch_env`) a step ``t`` that
returns ``terminated`` or ``truncated`` writes the episode's *final* observation into row
``t + 1``; step ``t + 1`` is then a reset step (its action ignored, reward 0, flags false,
``valid[t + 1]`` false) whose next row is the new episode's first observation. So every valid
step is a true transition ``(obs[t], action[t], reward[t], obs[t + 1], terminated[t],
truncated[t])`` - a truncated one bootstraps from the kept final observation, a terminated one
does not bootstrap - and reset steps are stored but never handed to a sampler as sampleable.

:class:`TransitionStorage` addresses single steps (item ``s * T + t``) for off-policy
learners; :class:`SequenceStorage` addresses whole segments as sequences with the recurrent
state stored at their start and a burn-in prefix (R2D2, Kapturowski et al. 2019).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from mtrl.actors.unroll import ObsArray, UnrollBuffer, unroll_fields
from mtrl.learner.unroll_record import UnrollRecord
from mtrl.replay.state import arrays_to_plain, load_arrays, require

__all__ = [
    "SegmentRing",
    "SequenceBatch",
    "SequenceStorage",
    "TransitionBatch",
    "TransitionStorage",
    "segment_fields",
]

FieldSpec = tuple[tuple[int, ...], np.dtype]


def segment_fields(
    unroll_length: int, obs_space: gym.Space, action_space: gym.Space, state_size: int = 0
) -> dict[str, FieldSpec]:
    """Name -> (shape, dtype) of one segment's arrays: an unroll's fields without the env axis
    (``versions``, one row per unroll, becomes one row per segment)."""
    out: dict[str, FieldSpec] = {}
    for name, (shape, dtype) in unroll_fields(
        unroll_length, 1, obs_space, action_space, state_size
    ).items():
        if name == "versions":
            out[name] = (shape, dtype)
        elif name == "core_state":
            out[name] = (shape[1:], dtype)
        else:
            out[name] = ((shape[0], *shape[2:]), dtype)
    return out


def _leaf(obs: ObsArray, name: str) -> np.ndarray:
    """The array named ``name`` (``obs`` or ``obs/key/...``) of an (nested) observation."""
    for key in name.split("/")[1:]:
        obs = obs[key]
    return obs


def _nest(leaves: Mapping[str, np.ndarray]) -> ObsArray:
    """An observation (array, or nested dict keyed as the names say) from its named leaves."""
    if "obs" in leaves:
        return leaves["obs"]
    root: dict[str, Any] = {}
    for name, array in leaves.items():
        *path, last = name.split("/")[1:]
        node = root
        for key in path:
            node = node.setdefault(key, {})
        node[last] = array
    return root


class SegmentRing:
    """A ring of ``num_segments`` unroll segments of one task (see the module docstring).

    Slots fill from 0 up; once full, the oldest segments are overwritten first. The filled
    slots are always ``[0, size)``.
    """

    kind = "segments"

    def __init__(
        self,
        task: int,
        unroll_length: int,
        num_segments: int,
        obs_space: gym.Space,
        action_space: gym.Space,
        state_size: int = 0,
    ) -> None:
        if unroll_length < 1 or num_segments < 1:
            raise ValueError(
                f"replay of task {task}: unroll_length ({unroll_length}) and the number of "
                f"segments ({num_segments}) must be at least 1"
            )
        self.task = task
        self.unroll_length = unroll_length
        self.num_segments = num_segments
        self.state_size = state_size
        self.fields = segment_fields(unroll_length, obs_space, action_space, state_size)
        self.arrays = {
            name: np.zeros((num_segments, *shape), dtype)
            for name, (shape, dtype) in self.fields.items()
        }
        self.cursor = 0  # the slot the next segment goes to
        self.size = 0  # slots holding data
        self.segments_added = 0  # segments ever written (for statistics)

    @staticmethod
    def segments_nbytes(
        num_segments: int,
        unroll_length: int,
        obs_space: gym.Space,
        action_space: gym.Space,
        state_size: int = 0,
    ) -> int:
        """Bytes the arrays of ``num_segments`` segments take (computed without allocating)."""
        fields = segment_fields(unroll_length, obs_space, action_space, state_size)
        per_segment = sum(math.prod(shape) * dtype.itemsize for shape, dtype in fields.values())
        return num_segments * per_segment

    def empty_like(self, num_segments: int) -> SegmentRing:
        """An empty storage of the same kind, task and fields holding ``num_segments``
        segments (a replay shard's part of this one: :mod:`mtrl.replay.sharded`)."""
        if num_segments < 1:
            raise ValueError(f"replay of task {self.task}: {num_segments} segments (need >= 1)")
        clone = copy.copy(self)
        clone.num_segments = num_segments
        clone.arrays = {
            name: np.zeros((num_segments, *shape), dtype)
            for name, (shape, dtype) in self.fields.items()
        }
        clone.cursor = clone.size = clone.segments_added = 0
        return clone

    @property
    def allocated_nbytes(self) -> int:
        """Bytes the arrays take."""
        return sum(a.nbytes for a in self.arrays.values())

    def _source(self, buf: UnrollBuffer, name: str) -> np.ndarray:
        """Field ``name`` of ``buf`` with the env copy as its leading axis."""
        if name == "core_state":
            if buf.core_state is None:
                raise ValueError(
                    f"replay of task {self.task} stores recurrent states (state_size "
                    f"{self.state_size}) but the unroll carries none"
                )
            return buf.core_state
        if name == "versions":
            return np.broadcast_to(buf.versions, (buf.num_envs, buf.length))
        array = _leaf(buf.obs, name) if name.startswith("obs") else getattr(buf, name)
        return np.swapaxes(array, 0, 1)

    def write(self, buf: UnrollBuffer) -> np.ndarray:
        """Copy ``buf``'s ``B`` segments into the ring; return the ``B`` slots written.

        The copy goes in at most two contiguous blocks (before and after the wrap), so the
        caller may reuse ``buf`` as soon as this returns.
        """
        if buf.task != self.task:
            raise ValueError(f"replay of task {self.task} was given an unroll of task {buf.task}")
        if buf.length != self.unroll_length:
            raise ValueError(
                f"replay of task {self.task} stores unrolls of {self.unroll_length} steps, "
                f"got one of {buf.length}"
            )
        n = buf.num_envs
        if n > self.num_segments:
            raise ValueError(
                f"replay of task {self.task} holds {self.num_segments} segments, fewer than the "
                f"{n} env copies of one unroll; raise its capacity"
            )
        first = min(n, self.num_segments - self.cursor)
        for name, dst in self.arrays.items():
            src = self._source(buf, name)
            dst[self.cursor : self.cursor + first] = src[:first]
            dst[: n - first] = src[first:]
        slots = (self.cursor + np.arange(n)) % self.num_segments
        self.cursor = (self.cursor + n) % self.num_segments
        self.size = min(self.size + n, self.num_segments)
        self.segments_added += n
        return slots

    def _obs(self, segments: np.ndarray, rows: np.ndarray | slice) -> ObsArray:
        return _nest({n: a[segments, rows] for n, a in self.arrays.items() if n.startswith("obs")})

    def state_dict(self) -> dict[str, Any]:
        """Plain data (tensors sharing memory with the filled slots, numbers, strings): loads
        with ``torch.load(weights_only=True)``."""
        return {
            "kind": self.kind,
            "task": self.task,
            "unroll_length": self.unroll_length,
            "num_segments": self.num_segments,
            "state_size": self.state_size,
            "cursor": self.cursor,
            "size": self.size,
            "segments_added": self.segments_added,
            "arrays": arrays_to_plain({n: a[: self.size] for n, a in self.arrays.items()}),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved into a ring built with the same settings."""
        where = f"replay of task {self.task}"
        for key in ("kind", "unroll_length", "num_segments", "state_size"):
            require(state, key, getattr(self, key), where)
        size = int(state["size"])
        load_arrays({n: a[:size] for n, a in self.arrays.items()}, state["arrays"], where)
        for array in self.arrays.values():
            array[size:] = 0
        self.cursor, self.size = int(state["cursor"]), size
        self.segments_added = int(state["segments_added"])


@dataclass
class TransitionBatch:
    """``n`` single steps, each with its next observation (batch-major arrays)."""

    obs: ObsArray  # [n, *obs]
    actions: np.ndarray  # [n, *raw_action]
    rewards: np.ndarray  # [n] float32 (reward_scale applied)
    next_obs: ObsArray  # [n, *obs]: the final observation where the episode ended
    terminated: np.ndarray  # [n] bool: no bootstrap from next_obs
    truncated: np.ndarray  # [n] bool: bootstrap from next_obs (the final observation)
    behaviour_logp: np.ndarray  # [n] float32
    versions: np.ndarray  # [n] int64: the weights version that acted


class TransitionStorage(SegmentRing):
    """Single steps of one task: item ``i`` is step ``i % T`` of segment ``i // T``.

    ``capacity`` transitions are rounded up to whole segments (``ceil(capacity / T)``).
    """

    kind = "transitions"

    def __init__(
        self,
        task: int,
        obs_space: gym.Space,
        action_space: gym.Space,
        unroll_length: int,
        capacity: int,
    ) -> None:
        super().__init__(
            task, unroll_length, -(-capacity // unroll_length), obs_space, action_space
        )

    @staticmethod
    def nbytes(
        capacity: int, unroll_length: int, obs_space: gym.Space, action_space: gym.Space
    ) -> int:
        """Bytes a storage of ``capacity`` transitions will take, before allocating it."""
        segments = -(-capacity // unroll_length)
        return SegmentRing.segments_nbytes(segments, unroll_length, obs_space, action_space)

    @property
    def capacity(self) -> int:
        """Items the sampler addresses: ``num_segments * T``."""
        return self.num_segments * self.unroll_length

    def add_unroll(self, buf: UnrollBuffer) -> tuple[np.ndarray, np.ndarray]:
        """Store ``buf``; return the ``T x B`` items written and which may be sampled (false
        on reset steps), for :meth:`~mtrl.replay.samplers.Sampler.add`."""
        slots = self.write(buf)
        T = self.unroll_length
        items = (slots[:, None] * T + np.arange(T)).ravel()
        return items, self.arrays["valid"][slots].ravel()

    def get(self, items: np.ndarray) -> TransitionBatch:
        """The transitions ``items`` (copies, gathered by index)."""
        seg, t = np.divmod(np.asarray(items, np.int64), self.unroll_length)
        a = self.arrays
        return TransitionBatch(
            obs=self._obs(seg, t),
            actions=a["actions"][seg, t],
            rewards=a["rewards"][seg, t],
            next_obs=self._obs(seg, t + 1),
            terminated=a["terminated"][seg, t],
            truncated=a["truncated"][seg, t],
            behaviour_logp=a["behaviour_logp"][seg, t],
            versions=a["versions"][seg, t],
        )


@dataclass
class SequenceBatch(UnrollRecord[np.ndarray]):
    """``n`` stored sequences as an unroll record (``N = n``; ``valid`` false on reset steps,
    burn-in rows keeping their own value), which :func:`~mtrl.learner.batch.task_batch` takes
    as it is: run the core from ``core_state`` over all ``T`` rows, zeroing it where ``valid``
    says an episode starts, and train on ``loss_mask`` only."""

    versions: np.ndarray  # [T, n]
    core_state: np.ndarray | None  # [n, S]: the core state before row 0
    loss_mask: np.ndarray  # [T, n]: valid and past the burn-in prefix
    burn_in: int

    @property
    def policy_version(self) -> int:
        """The oldest weights version that acted in these sequences."""
        return int(self.versions.min())


def _time_major(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.swapaxes(array, 0, 1))


class SequenceStorage(SegmentRing):
    """Whole segments of one task as sequences of ``T`` steps (item = segment).

    The recurrent state stored with a sequence is the actor's core state before its row 0:
    the unroll carries no state elsewhere, so a sequence is one env copy's unroll and its
    length is the actors' unroll length. The first ``burn_in`` steps only warm the state up
    (R2D2's burn-in against the staleness of the stored state); the loss sees the rest. A
    sequence whose steps past the burn-in are all reset steps is never sampleable.
    """

    kind = "sequences"

    def __init__(
        self,
        task: int,
        obs_space: gym.Space,
        action_space: gym.Space,
        unroll_length: int,
        capacity: int,
        state_size: int = 0,
        burn_in: int = 0,
    ) -> None:
        if not 0 <= burn_in < unroll_length:
            raise ValueError(
                f"replay of task {task}: burn_in ({burn_in}) must lie in [0, unroll_length = "
                f"{unroll_length}) so that each sequence trains on at least one step"
            )
        super().__init__(task, unroll_length, capacity, obs_space, action_space, state_size)
        self.burn_in = burn_in

    @staticmethod
    def nbytes(
        capacity: int,
        unroll_length: int,
        obs_space: gym.Space,
        action_space: gym.Space,
        state_size: int = 0,
    ) -> int:
        """Bytes a storage of ``capacity`` sequences will take, before allocating it."""
        return SegmentRing.segments_nbytes(
            capacity, unroll_length, obs_space, action_space, state_size
        )

    @property
    def capacity(self) -> int:
        """Items (sequences) the sampler addresses."""
        return self.num_segments

    def add_unroll(self, buf: UnrollBuffer) -> tuple[np.ndarray, np.ndarray]:
        """Store ``buf``; return the ``B`` sequences written and which may be sampled."""
        slots = self.write(buf)
        return slots, self.arrays["valid"][slots, self.burn_in :].any(axis=1)

    def get(self, items: np.ndarray) -> SequenceBatch:
        """The sequences ``items``, time-major (copies)."""
        seg = np.asarray(items, np.int64)
        a = self.arrays
        obs = self._obs(seg, slice(None))
        valid = _time_major(a["valid"][seg])
        loss_mask = valid.copy()
        loss_mask[: self.burn_in] = False
        return SequenceBatch(
            task=self.task,
            obs=_nest_map(obs, _time_major),
            actions=_time_major(a["actions"][seg]),
            behaviour_logp=_time_major(a["behaviour_logp"][seg]),
            rewards=_time_major(a["rewards"][seg]),
            terminated=_time_major(a["terminated"][seg]),
            truncated=_time_major(a["truncated"][seg]),
            valid=valid,
            versions=_time_major(a["versions"][seg]),
            core_state=a["core_state"][seg] if self.state_size else None,
            loss_mask=loss_mask,
            burn_in=self.burn_in,
        )

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "burn_in": self.burn_in}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        require(state, "burn_in", self.burn_in, f"replay of task {self.task}")
        super().load_state_dict(state)


def _nest_map(obs: ObsArray, fn: Any) -> ObsArray:
    return {k: _nest_map(v, fn) for k, v in obs.items()} if isinstance(obs, dict) else fn(obs)
