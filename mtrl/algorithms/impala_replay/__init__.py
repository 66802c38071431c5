"""IMPALA with experience replay (``learner.algorithm: impala_replay``): LASER's mixing of
fresh and replayed unrolls on top of the IMPALA update. The rule is
:mod:`~mtrl.algorithms.impala_replay.learner`, its ``learner.impala_replay`` section
:mod:`~mtrl.algorithms.impala_replay.settings`, the memory its replay takes
:mod:`~mtrl.algorithms.impala_replay.memory`."""

from mtrl.algorithms.impala_replay.learner import (
    REFILL_NOTE,
    ImpalaReplayLearner,
    make_impala_replay_learner,
)
from mtrl.algorithms.impala_replay.memory import replay_bytes
from mtrl.algorithms.impala_replay.settings import ImpalaReplaySettings

__all__ = [
    "REFILL_NOTE",
    "ImpalaReplayLearner",
    "ImpalaReplaySettings",
    "make_impala_replay_learner",
    "replay_bytes",
]
