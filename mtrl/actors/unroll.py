"""The unroll: one task's fixed-length, time-major block of experience, preallocated.

An actor owns a few :class:`UnrollBuffer` slots and fills them in place, so the hot path
allocates nothing. ``obs`` has ``T + 1`` rows: row ``T`` is the bootstrap observation, and it is
copied to row 0 of the next unroll. ``valid[t]`` is false on reset steps (the step after an
episode end, see :mod:`mtrl.plugins.batch_env`), which the loss masks out. ``versions[t]`` is
the version of the weights that chose the actions of step ``t`` (policy lag is measured from it).
With a recurrent model, ``core_state`` holds each env copy's core state before row 0, written
by whoever acts at step 0 (:mod:`mtrl.actors.core_states`), for the learner to start from.

The arrays are described by :func:`unroll_fields` (name → shape, dtype), so the same buffer can
live in private numpy memory (serial mode) or in shared memory (:mod:`mtrl.actors.shm`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from mtrl.learner.unroll_record import ARRAY_FIELDS, STEP_DTYPES, UnrollRecord

ObsArray = np.ndarray | dict[str, np.ndarray]
FieldSpec = tuple[tuple[int, ...], np.dtype]


def raw_action_layout(space: gym.Space) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of one *raw* policy action (what the unroll stores) for ``space``."""
    if isinstance(space, spaces.Discrete):
        return (), np.dtype(np.int64)
    if isinstance(space, spaces.MultiDiscrete):
        return space.shape, np.dtype(np.int64)
    if isinstance(space, spaces.Box):
        return space.shape, np.dtype(np.float32)
    raise TypeError(f"no policy head for action space {space}")


def _obs_fields(space: gym.Space, name: str, lead: tuple[int, ...], out: dict) -> None:
    if isinstance(space, spaces.Dict):
        for k, s in space.spaces.items():
            _obs_fields(s, f"{name}/{k}", lead, out)
        return
    if isinstance(space, spaces.Tuple):  # carried as a dict keyed "0", "1", ...
        for k, s in enumerate(space.spaces):
            _obs_fields(s, f"{name}/{k}", lead, out)
        return
    shape = () if isinstance(space, spaces.Discrete) else tuple(space.shape)
    out[name] = ((*lead, *shape), np.dtype(space.dtype))


def unroll_fields(
    T: int, N: int, obs_space: gym.Space, action_space: gym.Space, state_size: int = 0
) -> dict:
    """Name → (shape, dtype) of every array of one unroll; Dict and Tuple observations nest by
    ``/`` (a Tuple's elements are named ``0``, ``1``, ...). ``state_size > 0`` (a recurrent
    model's :attr:`~mtrl.learner.model.MultiTaskModel.state_size`) adds ``core_state``."""
    fields: dict[str, FieldSpec] = {}
    _obs_fields(obs_space, "obs", (T + 1, N), fields)
    shape, dtype = raw_action_layout(action_space)
    fields["actions"] = ((T, N, *shape), dtype)
    fields.update({name: ((T, N), dtype) for name, dtype in STEP_DTYPES.items()})
    fields["versions"] = ((T,), np.dtype(np.int64))
    if state_size > 0:
        fields["core_state"] = ((N, state_size), np.dtype(np.float32))
    return fields


def _nest_obs(arrays: Mapping[str, np.ndarray]) -> ObsArray:
    if "obs" in arrays:
        return arrays["obs"]
    root: dict = {}
    for name, arr in arrays.items():
        parts = name.split("/")
        if parts[0] != "obs":
            continue
        node = root
        for p in parts[1:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = arr
    return root


def obs_row(obs: ObsArray, t: int | slice) -> ObsArray:
    """Row (or rows) ``t`` of a time-major observation array or (nested) dict of arrays."""
    return {k: obs_row(v, t) for k, v in obs.items()} if isinstance(obs, dict) else obs[t]


def copy_obs_row(obs: ObsArray, dst: int, src_obs: ObsArray, src: int) -> None:
    """``obs[dst] = src_obs[src]`` for arrays or (nested) dicts of arrays, in place."""
    if isinstance(obs, dict):
        for k, v in obs.items():
            copy_obs_row(v, dst, src_obs[k], src)
    else:
        obs[dst] = src_obs[src]


@dataclass
class UnrollBuffer(UnrollRecord[np.ndarray]):
    """Storage for one unroll of ``T`` steps of ``N`` env copies of one task: the unroll
    record's arrays (:class:`~mtrl.learner.unroll_record.UnrollRecord`, ``obs`` an
    :data:`ObsArray`) with the weights version that acted at each step."""

    versions: np.ndarray  # [T] int64: weights version that acted at step t
    core_state: np.ndarray | None = None  # [N, S] float32: recurrent state before row 0

    @classmethod
    def from_arrays(cls, task: int, arrays: Mapping[str, np.ndarray]) -> UnrollBuffer:
        """A buffer over existing arrays named as by :func:`unroll_fields` (no copies)."""
        steps = {name: arrays[name] for name in ARRAY_FIELDS if name != "obs"}
        return cls(
            task=task,
            obs=_nest_obs(arrays),
            versions=arrays["versions"],
            core_state=arrays.get("core_state"),
            **steps,
        )

    @classmethod
    def allocate(
        cls,
        task: int,
        T: int,
        N: int,
        obs_space: gym.Space,
        action_space: gym.Space,
        state_size: int = 0,
    ) -> UnrollBuffer:
        """A buffer in private (this process's) memory."""
        fields = unroll_fields(T, N, obs_space, action_space, state_size)
        arrays = {name: np.zeros(shape, dtype) for name, (shape, dtype) in fields.items()}
        return cls.from_arrays(task, arrays)

    @property
    def length(self) -> int:
        return self.rewards.shape[0]

    @property
    def num_envs(self) -> int:
        return self.rewards.shape[1]

    @property
    def policy_version(self) -> int:
        """The oldest weights version that acted in this unroll (what the lag is measured by)."""
        return int(self.versions.min())
