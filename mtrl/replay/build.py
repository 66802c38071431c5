"""A task's replay as the experiment's ``replay:`` section says: the one place that turns the
section into samplers, so every replay-based rule draws the same way from the same keys.

A rule builds its own storage (transitions or sequences, sized from ``replay.capacity`` and its
own default) and hands it to :func:`task_replay`; a rule that anneals the importance-sampling
exponent over the run asks :func:`annealed_beta`.
"""

from __future__ import annotations

from collections.abc import Iterable

from mtrl.config.replay import ReplayConfig
from mtrl.replay.samplers import PrioritizedSampler, Sampler, UniformSampler
from mtrl.replay.storage import SequenceStorage, TransitionStorage
from mtrl.replay.task_replay import TaskReplay

__all__ = ["annealed_beta", "make_sampler", "set_beta", "task_replay"]


def make_sampler(replay: ReplayConfig, capacity: int) -> Sampler:
    """The sampler ``replay.sampler`` names over items ``[0, capacity)`` of one storage:
    uniform, or prioritized with ``replay.priority_alpha`` and ``replay.priority_beta``."""
    if replay.prioritized:
        return PrioritizedSampler(capacity, replay.priority_alpha, replay.priority_beta)
    return UniformSampler(capacity)


def task_replay(storage: TransitionStorage | SequenceStorage, replay: ReplayConfig) -> TaskReplay:
    """``storage`` with the sampler ``replay`` names over its items."""
    return TaskReplay(storage, make_sampler(replay, storage.capacity))


def annealed_beta(replay: ReplayConfig, progress: float) -> float:
    """The importance-sampling exponent at ``progress`` (0 to 1) of the run: from
    ``replay.priority_beta`` linearly to 1 (Schaul et al. 2016 anneal it so; the correction
    matters most at convergence)."""
    p = min(max(float(progress), 0.0), 1.0)
    return replay.priority_beta + (1.0 - replay.priority_beta) * p


def set_beta(replays: Iterable[TaskReplay], replay: ReplayConfig, progress: float) -> None:
    """Anneal the prioritized samplers of ``replays`` to :func:`annealed_beta` (nothing for
    uniform ones)."""
    if not replay.prioritized:
        return
    beta = annealed_beta(replay, progress)
    for r in replays:
        if isinstance(r.sampler, PrioritizedSampler):
            r.sampler.beta = beta
