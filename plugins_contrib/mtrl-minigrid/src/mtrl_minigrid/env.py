"""One MiniGrid/BabyAI level as gymnasium envs with a success flag, batched for mtrl.

A MiniGrid observation is ``{"image": uint8 (7, 7, 3) partial view (object, colour, state),
"direction": Discrete(4), "mission": str}``; the mission's space is MiniGrid's
``MissionSpace``, whose samples are strings, so mtrl tokenises it at the env boundary and its
text encoder reads it (no conversion here). MiniGrid gives a reward only when the level is
solved (``1 − 0.9 · steps / max_steps``), so an episode that terminates with a positive reward
succeeded: :class:`SuccessInfo` reports that as ``info["success"]``, which mtrl logs per task
(``task/<name>/success``) and ``mtrl eval`` turns into a success rate.

The image holds indices, not pixels: object (0–10), colour (0–5) and door state (0–2) per cell,
while MiniGrid declares it ``Box(0, 255)``. :class:`IndexBounds` declares the true bounds, so
mtrl's encoder scales each channel by its own largest index into [0, 1]; against 255 every
input stayed below 0.04 and BabyAI-GoToRedBallGrey did not learn (docs/BENCHMARKS.md, "BabyAI").

BabyAI's level generator retries a layout it rejects and prints ``Sampling rejected: ...`` on
stdout each time (tens of lines a minute in a run); :class:`SuccessInfo` drops those lines from
a reset's output and passes anything else on.
"""

from __future__ import annotations

import contextlib
import io
import sys
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from mtrl.plugins import BatchEnv, batch_env_from_gymnasium

RETRY_NOTES = ("Sampling rejected:", "Timeout during mission generation:")
"""Prefixes of the lines BabyAI prints when it regenerates a level."""


def image_bounds() -> np.ndarray:
    """The largest index of each image channel: object, colour, state (MiniGrid's tables)."""
    from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX

    return np.array([max(t.values()) for t in (OBJECT_TO_IDX, COLOR_TO_IDX, STATE_TO_IDX)])


class IndexBounds(gym.Wrapper):
    """The same observations, with the image's space bounded by its channels' largest indices
    (see the module docstring)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        image = space["image"]
        high = np.broadcast_to(image_bounds(), image.shape).astype(image.dtype)
        self.observation_space = spaces.Dict(
            {**space.spaces, "image": spaces.Box(0, high, image.shape, image.dtype)}
        )


class SuccessInfo(gym.Wrapper):
    """``info["success"]``: the level was solved this step (terminated with reward > 0); a
    reset's level-regeneration notes kept off stdout."""

    def reset(self, **kwargs: Any) -> tuple:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            result = self.env.reset(**kwargs)
        kept = [line for line in out.getvalue().splitlines() if not line.startswith(RETRY_NOTES)]
        if kept:
            print("\n".join(kept), file=sys.stdout)
        return result

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        solved = bool(terminated and reward > 0)
        return obs, reward, terminated, truncated, {**info, "success": solved}


def make_level(num_envs: int, seed: int = 0, *, level: str, **kwargs: Any) -> BatchEnv:
    """``num_envs`` copies of MiniGrid/BabyAI ``level`` (a gymnasium id such as
    ``BabyAI-GoToLocal-v0``); ``kwargs`` go to ``gymnasium.make`` (``max_steps``, ...)."""
    import minigrid  # noqa: F401  (registers the levels with gymnasium)

    def one() -> gym.Env:
        return SuccessInfo(IndexBounds(gym.make(level, **kwargs)))

    return batch_env_from_gymnasium(one, num_envs, seed)
