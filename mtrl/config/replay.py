"""The replay section of an experiment config (``replay:``): how much each task's replay holds
and how a replay-based learning rule draws from it.

One section for every rule that keeps a replay (``sac``, ``impala_replay``, a plugin's rule
registered with ``replay_bytes``), so the same idea has one key whatever the rule; a rule
without a replay ignores it. It is a top-level section, not a rule's ``learner.<rule>:``
one, because where the replay lives is the run's concern as much as the rule's. The storage
and samplers are :mod:`mtrl.replay` (docs/REPLAY.md); the learner reads this section as
``cfg.replay`` (:attr:`mtrl.config.LearnerConfig.replay`). Like the other config modules, this
one depends on pydantic alone.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt

from mtrl.config.base import ConfigModel

__all__ = ["ReplayConfig"]


class ReplayConfig(ConfigModel):
    """Each task's replay of a replay-based learning rule (``learner.algorithm: sac`` or
    ``impala_replay``): its size and its sampler (docs/REPLAY.md)."""

    capacity: PositiveInt | None = None
    """Env steps kept per task (one env step of one env copy is one transition), stored as
    whole unrolls of one env copy, so rounded up to a multiple of ``learner.unroll_length``;
    the oldest are overwritten. ``sac`` keeps them as transitions, ``impala_replay`` as
    ``capacity / unroll_length`` sequences of one unroll each. Host memory, counted by the
    pre-flight check. null: the rule's own default, 1,000,000 for ``sac`` (its replay feeds
    every gradient step) and 100,000 for ``impala_replay`` (it replays recent unrolls
    alongside fresh ones)."""
    sampler: Literal["uniform", "prioritized"] = "uniform"
    """How a task's replay is drawn from. ``uniform``: every stored step (or sequence) alike.
    ``prioritized``: proportional prioritized replay (Schaul et al. 2016), by each item's last
    TD error, with importance-sampling weights on the loss; ``sac`` only (its critics' TD
    errors; ``impala_replay`` refuses it)."""
    priority_alpha: float = Field(default=0.6, ge=0)
    """With ``sampler: prioritized``: the prioritisation exponent α, an item drawn with
    probability ``p^α / Σ p^α`` (0: uniform)."""
    priority_beta: float = Field(default=0.4, ge=0, le=1)
    """With ``sampler: prioritized``: the importance-sampling exponent β at the start of the
    run; it rises linearly to 1 at ``total_env_steps`` (full correction at convergence)."""

    @property
    def prioritized(self) -> bool:
        """Whether the sampler is prioritized."""
        return self.sampler == "prioritized"

    def capacity_or(self, default: int) -> int:
        """Env steps per task: ``capacity``, or the rule's ``default`` when it is null."""
        return self.capacity if self.capacity is not None else default
