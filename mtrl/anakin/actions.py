"""Raw policy actions → env actions on the device, with the space's constants placed once.

Same mapping as :func:`mtrl.learner.distributions.env_actions_tensor` (a test checks they
agree), which builds its constants from the space on every call: on a GPU that is a copy from
pageable host memory, and so a stream sync, on every step of an unroll.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces


class DeviceActionMap:
    """``map(raw) -> env actions`` for one action space, constants on ``device``."""

    def __init__(self, space: gym.Space, device: torch.device) -> None:
        self.discrete = isinstance(space, (spaces.Discrete, spaces.MultiDiscrete))
        if self.discrete:
            self.start = torch.as_tensor(np.asarray(space.start, np.int64), device=device)
        elif isinstance(space, spaces.Box):
            self.low = torch.as_tensor(space.low, dtype=torch.float32, device=device)
            self.high = torch.as_tensor(space.high, dtype=torch.float32, device=device)
            self.bounded = torch.isfinite(self.low) & torch.isfinite(self.high)
        else:
            raise TypeError(f"no env actions for action space {space!r}")

    def __call__(self, raw: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            return raw.long() + self.start
        low, high = self.low.to(raw.dtype), self.high.to(raw.dtype)
        squashed = low + (torch.tanh(raw) + 1.0) * 0.5 * (high - low)
        return torch.where(self.bounded, squashed, raw).clamp(low, high)
