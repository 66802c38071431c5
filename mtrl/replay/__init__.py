"""Experience replay: per-task storage of unrolls and the samplers that draw from it.

Pure array code (numpy), between the unroll queue and the learner; the actors do not change.
See docs/REPLAY.md for the layout and the sampling math; :mod:`mtrl.replay.build` turns the
experiment's ``replay:`` section into a task's sampler for every replay-based rule.
"""

from mtrl.replay.build import (
    actor_routes,
    annealed_beta,
    make_sampler,
    replay_metrics,
    set_beta,
    set_wait_hook,
    task_replay,
)
from mtrl.replay.samplers import PrioritizedSampler, Sampler, UniformSampler, sequence_priorities
from mtrl.replay.sharded import ReplayEmptied, ShardedTaskReplay
from mtrl.replay.storage import (
    SequenceBatch,
    SequenceStorage,
    TransitionBatch,
    TransitionStorage,
)
from mtrl.replay.sum_tree import SumTree
from mtrl.replay.task_replay import TaskReplay

__all__ = [
    "PrioritizedSampler",
    "ReplayEmptied",
    "Sampler",
    "SequenceBatch",
    "SequenceStorage",
    "ShardedTaskReplay",
    "SumTree",
    "TaskReplay",
    "TransitionBatch",
    "TransitionStorage",
    "UniformSampler",
    "actor_routes",
    "annealed_beta",
    "make_sampler",
    "replay_metrics",
    "sequence_priorities",
    "set_beta",
    "set_wait_hook",
    "task_replay",
]
