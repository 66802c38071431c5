"""Short human-readable descriptions of gymnasium spaces and env specs, for listings and errors."""

from __future__ import annotations

import re
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from mtrl.plugins.spec import EnvSpec

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


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


def describe_env(spec: EnvSpec, *, long: bool = False) -> dict[str, Any]:
    """One ``mtrl envs`` row: id, plugin and single-copy spaces; with ``long`` also what the
    plugin registered (description, stochastic, random/reference score, time limit).

    An env whose spaces were not declared is built once to find them. What its libraries warn
    meanwhile (a deprecated id, a MuJoCo model warning) is kept as the row's ``notes``, not
    printed over the listing; an env that cannot be built gets ``error`` instead of spaces, so
    one broken env hides no other.
    """
    row: dict[str, Any] = {"id": spec.id, "plugin": spec.plugin}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            row["observation"] = describe_space(spec.observation_space)
            row["action"] = describe_space(spec.action_space)
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:160]
    if long:
        row.update(
            description=spec.description,
            stochastic=spec.stochastic,
            random_score=spec.random_score,
            reference_score=spec.reference_score,
            max_episode_steps=spec.max_episode_steps,
            num_envs_multiple=spec.num_envs_multiple,
        )
    notes = list(dict.fromkeys(_note(w.message) for w in caught))
    if notes:
        row["notes"] = notes
    return row


def _note(message: Warning | str) -> str:
    """A warning as one plain line: colour codes and gymnasium's ``WARN:`` prefix dropped."""
    text = _ANSI.sub("", str(message)).strip()
    return text.removeprefix("WARN: ").splitlines()[0][:200]
