"""What the SAC rule can train: the learner config it accepts (:func:`check_config`, registered
as the rule's ``checks``, so the host runs it when the config is parsed) and the tasks it can
train (:func:`check_tasks`, when the learner is built: the spaces are known then)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gymnasium import spaces

from mtrl.algorithms.sac.settings import SacSettings
from mtrl.config import LearnerConfig
from mtrl.errors import UserError
from mtrl.learner.encoders import ACTION_MASK_KEY
from mtrl.learner.model import TaskSpaces

__all__ = ["SacUnsupportedError", "check_config", "check_tasks"]

_FIX = "use learner.algorithm: impala for it, or leave the task out"


class SacUnsupportedError(UserError):
    """A task the SAC rule cannot train (its action space, or an action mask)."""


def check_config(cfg: LearnerConfig, settings: SacSettings | None = None) -> list[str]:
    """What SAC cannot run of learner config ``cfg`` (empty: nothing): it trains on single
    transitions, so a recurrent core (which would need sequence replay) is refused; running
    observation statistics are one process's, so ``normalize_obs`` is refused with
    data-parallel replicas."""
    if cfg.model.core is not None:
        return [
            "learning rule 'sac' trains on single transitions and has no recurrent core: "
            "remove learner.model.core or choose learner.algorithm: impala"
        ]
    if settings is not None and settings.normalize_obs and cfg.parallel.data_parallel > 1:
        return [
            "learner.sac.normalize_obs is not combined with learner.parallel.data_parallel: "
            f"{cfg.parallel.data_parallel} (each replica's observation statistics would drift "
            "apart from the others'): choose one"
        ]
    return []


def _problem(task: TaskSpaces) -> str | None:
    act = task.action_space
    if isinstance(act, spaces.Discrete):
        obs = task.observation_space
        if isinstance(obs, spaces.Dict) and ACTION_MASK_KEY in obs.spaces:
            return f"its observation carries an {ACTION_MASK_KEY!r}, which SAC does not apply"
        return None
    if isinstance(act, spaces.Box):
        low, high = np.asarray(act.low, np.float64), np.asarray(act.high, np.float64)
        if not (np.isfinite(low) & np.isfinite(high) & (high > low)).all():
            return (
                f"its Box action space {act} is not bounded on every dimension; SAC squashes "
                "actions into finite [low, high] bounds"
            )
        return None
    return f"its action space is {act}; SAC supports Discrete and bounded Box actions"


def check_tasks(tasks: Sequence[TaskSpaces], names: Sequence[str]) -> None:
    """Raise :class:`SacUnsupportedError` naming the first task SAC cannot train."""
    for i, (task, name) in enumerate(zip(tasks, names, strict=True)):
        problem = _problem(task)
        if problem is not None:
            raise SacUnsupportedError(
                f"learner.algorithm: sac cannot train tasks[{i}] ({name!r}): {problem}; {_FIX}"
            )
