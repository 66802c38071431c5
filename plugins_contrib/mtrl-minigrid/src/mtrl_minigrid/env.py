"""One MiniGrid/BabyAI level as gymnasium envs with a success flag, batched for mtrl.

A MiniGrid observation is ``{"image": uint8 (7, 7, 3) partial view (object, colour, state),
"direction": Discrete(4), "mission": str}``; the mission's space is MiniGrid's
``MissionSpace``, whose samples are strings, so mtrl tokenises it at the env boundary and its
text encoder reads it (no conversion here). MiniGrid gives a reward only when the level is
solved (``1 − 0.9 · steps / max_steps``), so an episode that terminates with a positive reward
succeeded: :class:`SuccessInfo` reports that as ``info["success"]``, which mtrl logs per task
(``task/<name>/success``) and ``mtrl eval`` turns into a success rate.

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

from mtrl.plugins import BatchEnv, batch_env_from_gymnasium

RETRY_NOTES = ("Sampling rejected:", "Timeout during mission generation:")
"""Prefixes of the lines BabyAI prints when it regenerates a level."""


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
        return SuccessInfo(gym.make(level, **kwargs))

    return batch_env_from_gymnasium(one, num_envs, seed)
