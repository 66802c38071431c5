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

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt

from mtrl.config.base import ConfigModel

__all__ = ["RateLimitConfig", "ReplayConfig", "ShardsConfig"]


class RateLimitConfig(ConfigModel):
    """A samples-per-insert ratio held between the inserts into a task's sharded replay and the
    draws from it (Reverb's rate limiter; :mod:`mtrl.replay.rate_limiter`)."""

    samples_per_insert: PositiveFloat
    """Items drawn per item stored (transitions for ``sac``, sequences for
    ``impala_replay``), counted over all of a task's shards."""
    min_size_to_sample: PositiveInt = 1
    """Items a task's shards must hold (acknowledged) before any draw."""
    error_buffer: PositiveFloat = 100.0
    """How far (in items drawn) the draws may run ahead of or behind ``samples_per_insert``
    times the inserts before the side named by ``waits`` waits."""
    waits: Literal["learner", "actors"] = "learner"
    """Who waits when the ratio is out of bounds. ``learner``: a draw waits for inserts still on
    their way to the shards; ``actors``: an insert waits for draws still in flight (the
    prefetch), so the trainer takes no new unroll meanwhile and the actors' slots stay full.
    Where nothing in flight can restore the ratio the call goes ahead and is counted
    (``replay/rate_overruns``); the waits are ``replay/learner_wait_s`` and
    ``replay/insert_wait_s``. With actor-side inserts (``actor_inserts``), ``actors``: a Ray
    actor whose shard is ahead of its share of the ratio waits before inserting
    (``replay/actor_wait_s``, ``replay/actor_overruns``); ``learner``: a draw waits for the
    actors' inserts to reach the shards."""
    max_wait_s: PositiveFloat = 5.0
    """The longest one wait lasts (an actor's before it inserts, the learner's before it
    draws): past it the call goes ahead and is counted as an overrun, so neither side can
    stall the other for good."""


class ShardsConfig(ConfigModel):
    """Replay shards as Ray actors (``actors.mode: ray``) on the actors' nodes: each task's
    replay split over shards its actors (or the learner) insert into and the learner draws
    from in proportion to their total priority (docs/DISTRIBUTED.md, "Sharded replay")."""

    count: PositiveInt = 2
    """Shards: per task with ``layout: per_task``, in all with ``layout: mixed``. Each holds
    ``capacity / count`` of a task's items (rounded up to whole unrolls of one env copy)."""
    layout: Literal["mixed", "per_task"] = "mixed"
    """``mixed``: every shard holds a part of every task's replay; ``per_task``: each task has
    ``count`` shards of its own (``count x tasks`` actors)."""
    num_cpus: NonNegativeFloat = 0.0
    """CPUs each shard reserves in Ray. Shard ``i`` (of each task) goes to the ``i mod
    hosts``-th of the nodes with CPUs that offer ``num_cpus`` and ``resources`` (node ids
    sorted; a head node without CPUs is never one), where the actors run; a shard that its
    node cannot take within a minute (full, or lost) goes wherever Ray has room."""
    resources: dict[str, PositiveFloat] = Field(default_factory=dict)
    """Custom Ray resources each shard asks for (e.g. the one the actor nodes offer)."""
    prefetch: bool = True
    """Draw the next batch while the learner trains on this one (its items drawn with the
    priorities of one step earlier)."""
    draw_batches: PositiveInt = 1
    """Batches drawn at once: one call per shard asks for ``draw_batches`` batches' rows, and
    the learner's next draws take them in turn (in a random order; each row's distribution
    unchanged). A Ray call's latency and fixed bytes, which outweigh a small batch's own,
    are then shared by that many batches; the last rows taken were drawn with priorities
    that many steps old. 1: a call per batch."""
    restart_lost: bool = True
    """Start a lost shard again (empty; its items are lost and counted as
    ``replay/lost_items``) and go on; false: a lost shard ends the run."""
    rate_limit: RateLimitConfig | None = None
    """The samples-per-insert ratio held across the cluster; null: none."""
    actor_inserts: bool = True
    """Ray actors of a rule that draws only from its replay (``sac``) store each unroll in a
    shard on their own node and send the learner a summary (steps, episodes, observation
    statistics), so no unroll crosses the network. Shards then go beside the actors: shard
    ``i`` on the ``i``-th node (by id) that has CPUs and the shard's ``num_cpus`` and
    ``resources``. false: every unroll goes to the learner, which inserts it (as
    ``impala_replay`` always does: it trains on fresh unrolls too)."""


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

    shards: ShardsConfig | None = None
    """Replay shards as Ray actors beside the actors (``actors.mode: ray`` only; null: each
    task's replay lives in the learner's process). The learning rule does not know which it
    has (docs/DISTRIBUTED.md, "Sharded replay")."""

    @property
    def prioritized(self) -> bool:
        """Whether the sampler is prioritized."""
        return self.sampler == "prioritized"

    def capacity_or(self, default: int) -> int:
        """Env steps per task: ``capacity``, or the rule's ``default`` when it is null."""
        return self.capacity if self.capacity is not None else default
