"""Short human-readable descriptions of gymnasium spaces, for listings and errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


def describe_space(space: gym.Space) -> str:
    """``Box(-1,1,(3,),float32)`` → ``float32[3] in [-1, 1]``; Discrete(6) stays ``Discrete(6)``."""
    if isinstance(space, spaces.Box):
        shape = ",".join(str(d) for d in space.shape)
        lo, hi = np.min(space.low), np.max(space.high)
        bounds = "" if not (np.isfinite(lo) and np.isfinite(hi)) else f" in [{lo:g}, {hi:g}]"
        return f"{space.dtype}[{shape}]{bounds}"
    if isinstance(space, spaces.Discrete):
        return (
            f"Discrete({space.n})"
            if space.start == 0
            else f"Discrete({space.n}, start={space.start})"
        )
    if isinstance(space, spaces.MultiDiscrete):
        return f"MultiDiscrete({space.nvec.tolist()})"
    if isinstance(space, spaces.MultiBinary):
        return f"MultiBinary({space.n})"
    if isinstance(space, spaces.Dict):
        return "Dict(" + ", ".join(f"{k}: {describe_space(s)}" for k, s in space.items()) + ")"
    if isinstance(space, spaces.Tuple):
        return "Tuple(" + ", ".join(describe_space(s) for s in space.spaces) + ")"
    return str(space)
