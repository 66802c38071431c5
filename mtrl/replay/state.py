"""Replay contents as checkpoint data: numpy arrays to and from plain tensors.

A checkpoint holds only tensors, numbers, strings, lists and dicts (:func:`mtrl.checkpoint.
check_plain`), so it loads with ``torch.load(weights_only=True)``. The tensors made here share
memory with the replay's arrays, as a module's ``state_dict`` shares its parameters: save the
state before adding more data (a replay of several GiB is not copied to be checkpointed).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

__all__ = ["arrays_to_plain", "load_arrays", "require"]


def arrays_to_plain(arrays: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Name -> tensor sharing each array's memory."""
    return {name: torch.from_numpy(np.ascontiguousarray(a)) for name, a in arrays.items()}


def load_arrays(dst: Mapping[str, np.ndarray], src: Mapping[str, torch.Tensor], where: str) -> None:
    """Copy each tensor of ``src`` into the array of the same name in ``dst`` (same shape and
    dtype, bit for bit); a missing, extra or mismatched array raises naming it."""
    if set(dst) != set(src):
        raise ValueError(f"{where}: the state holds arrays {sorted(src)}, expected {sorted(dst)}")
    for name, tensor in src.items():
        array = tensor.numpy()
        if array.shape != dst[name].shape or array.dtype != dst[name].dtype:
            raise ValueError(
                f"{where}[{name!r}]: the state's {array.dtype}{list(array.shape)} does not fit "
                f"the replay's {dst[name].dtype}{list(dst[name].shape)} (different spaces, "
                "unroll length or capacity)"
            )
        np.copyto(dst[name], array)


def require(state: Mapping, key: str, expected: object, where: str) -> None:
    """Raise when ``state[key]`` differs from what this replay was built with."""
    if state.get(key) != expected:
        raise ValueError(
            f"{where}: the state was saved with {key} = {state.get(key)!r}, this replay has "
            f"{expected!r}; build it with the same settings to load it"
        )
