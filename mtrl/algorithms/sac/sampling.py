"""How much SAC trains and on which tasks: the replay ratio and the per-task mix of a batch.

**Replay ratio.** ``replay_ratio`` is samples trained per env step. The trainer calls
``update`` whenever the actors have brought ``learner.batch_size`` env columns, and how many
env steps that is depends on the unroll length, the tasks' ``num_envs`` and the actors'
speed, so :class:`ReplayRatio` turns each update's new env steps into gradient steps,
``ratio × steps / batch_size``, carrying the fraction to the next update: over any run the
samples trained are ``ratio × env steps`` to within one batch, fast actors or slow.

**Task mix.** Each gradient step draws ``batch_size`` transitions across the tasks whose replay
is ready (``learning_starts``), each in proportion to its share of the *weighted* fresh data,
``Σ env steps × loss_weight`` over recent updates (:class:`TaskMix`). The scheduler's loss
weights are ``target share / data share`` (:mod:`mtrl.train.loss_weights`), so that share
is each task's target share (its ``weight``, or the adaptive policy's share) while
``scheduler.loss_weights`` is on, and its data share when off: a replay rule meets the same
contract as IMPALA, and equal weights give MT-SAC's equal sampling (Yu et al. 2019) whatever
the actors' speeds. Sampling rather than weighting the loss keeps every sample's weight at 1
(a rarely-drawn task with a large weight would make the gradient noisy). The batch is split into
whole counts with the remainders drawn at random, so the expected count of each task is
exactly its share of the batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["MIX_DECAY", "ReplayRatio", "TaskMix"]

MIX_DECAY = 0.99
"""Per-update decay of the weighted step counts behind the task mix (a window of ~100
updates: long enough to average the tasks' unroll arrivals, short enough to follow the
scheduler)."""


class ReplayRatio:
    """Gradient steps owed for new env steps at ``ratio`` samples per step (see the module
    docstring); :attr:`carry` is the fraction of a step not yet taken."""

    def __init__(self, ratio: float, batch_size: int) -> None:
        if ratio <= 0 or batch_size < 1:
            raise ValueError(f"replay ratio {ratio} and batch size {batch_size} must be > 0")
        self.per_step = ratio / batch_size
        self.carry = 0.0

    def steps(self, env_steps: int) -> int:
        """Gradient steps to take for ``env_steps`` new env steps (the fraction carried)."""
        owed = self.carry + env_steps * self.per_step
        steps = int(owed)
        self.carry = owed - steps
        return steps


class TaskMix:
    """Each task's share of a batch from its weighted fresh data (see the module docstring)."""

    def __init__(self, num_tasks: int, decay: float = MIX_DECAY) -> None:
        self.weighted = np.zeros(num_tasks)
        self.decay = decay

    def observe(self, counts: dict[int, float]) -> None:
        """One update's weighted env steps per task (``num_steps × loss_weight``)."""
        self.weighted *= self.decay
        for task, count in counts.items():
            self.weighted[task] += count

    def shares(self, ready: Sequence[int]) -> np.ndarray:
        """Shares of the ``ready`` tasks (sum 1; equal where none has data yet)."""
        w = self.weighted[list(ready)]
        return w / w.sum() if w.sum() > 0 else np.full(len(ready), 1.0 / len(ready))

    def split(self, batch_size: int, ready: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        """Transitions of each ready task in a batch of ``batch_size``: ``floor(share × B)``
        each, and the rest one each to tasks picked by systematic sampling on the remainders
        (each remainder is below 1, so a task gets its extra one with probability equal to its
        remainder: the expected count is ``share × B`` exactly)."""
        exact = self.shares(ready) * batch_size
        counts = np.floor(exact).astype(np.int64)
        rest = batch_size - int(counts.sum())
        if rest > 0:
            points = rng.random() + np.arange(rest)
            picked = np.searchsorted(np.cumsum(exact - counts), points, side="right")
            np.add.at(counts, np.minimum(picked, len(counts) - 1), 1)
        return counts
