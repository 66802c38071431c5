"""The SAC learning rule's settings (``learner.sac``; used when ``learner.algorithm: sac``),
registered with the rule (:mod:`mtrl.algorithms.builtin`) so the host validates the section.

Soft actor-critic (Haarnoja et al. 2018) over a per-task replay, multi-task as in Meta-World's
MT-SAC (Yu et al. 2019), with SAC-discrete (Christodoulou 2019) for ``Discrete`` actions; the
rule itself is :mod:`mtrl.algorithms.sac`. ``learner.gamma`` is its discount; IMPALA's fields
(``learning_rate``, ``lr_schedule``, ``optimizer``, the entropy and value coefficients,
PopArt) do not apply to it. Its replay's size and sampler are the experiment's ``replay:``
section, shared with every replay-based rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from mtrl.config.base import ConfigModel

DEFAULT_CAPACITY = 1_000_000
"""Transitions (env steps) SAC keeps per task when ``replay.capacity`` is null."""

_SHARED = "the top-level replay: section every replay-based rule reads"


class SacSettings(ConfigModel):
    """Sampling and optimisation of the SAC rule (its replay's size and sampler are the
    experiment's ``replay:`` section)."""

    moved_keys: ClassVar[Mapping[str, str]] = {
        "replay_capacity": f"replay.capacity ({_SHARED})",
        "prioritized": f"replay.sampler: prioritized ({_SHARED})",
        "priority_alpha": f"replay.priority_alpha ({_SHARED})",
        "priority_beta": f"replay.priority_beta ({_SHARED})",
    }

    replay_ratio: PositiveFloat = 256.0
    """Samples trained per env step, whatever the actors' speed: each update takes
    ``replay_ratio x new env steps / batch_size`` gradient steps (the fraction carried to the
    next). 256 with ``batch_size: 256`` is SAC's one gradient step per env step; any multiple
    above it takes several (2560: ten per env step, the high replay ratios that
    ``reset_every`` makes pay)."""
    batch_size: PositiveInt = 256
    """Transitions per gradient step, drawn across the tasks (each task's share is its share of
    the weighted fresh data: its target share while ``scheduler.loss_weights`` is on)."""
    learning_starts: NonNegativeInt = 5000
    """Transitions a task's replay holds before it is sampled (and its env steps owe gradient
    steps); until then its actors act with the untrained policy."""
    tau: float = Field(default=0.005, gt=0, le=1)
    """Polyak step of the target critics after every gradient step (1: a plain copy)."""
    critic_lr: PositiveFloat = 3e-4
    """Adam step size of the twin critics."""
    actor_lr: PositiveFloat = 3e-4
    """Adam step size of the policy (times a task's ``learning_rate_scale`` for its own encoder
    and head)."""
    alpha_lr: PositiveFloat = 3e-4
    """Adam step size of each task's log-temperature."""
    initial_alpha: PositiveFloat = 1.0
    """Every task's temperature at the start."""
    box_target_entropy: float = -1.0
    """Target entropy of a ``Box`` task per action dimension: the target is this times
    ``|A|`` (SAC's ``-|A|`` by default), measured on the squashed action in ``[-1, 1]``
    before it is rescaled to the env's bounds, so tasks whose actions come in different units
    explore alike (as Stable-Baselines3 measures it)."""
    discrete_target_entropy: float = Field(default=0.5, gt=0, lt=1)
    """Target entropy of a ``Discrete(n)`` task as a fraction of ``log n`` (the uniform
    policy's entropy). SAC-discrete's 0.98 keeps the policy nearly uniform; 0.5 lets a task
    such as CartPole act decisively while exploring."""
    critic_action: Literal["input", "hidden"] = "input"
    """Where a ``Box`` task's squashed action enters its critics. ``input``: concatenated to a
    vector observation before the critic's first layer, SAC's own critic (Haarnoja et al. 2018;
    Stable-Baselines3, CleanRL), so the action meets the state through every hidden layer; an
    image, text, Dict or Tuple observation has its own encoder and takes the action after it,
    as ``hidden`` does. ``hidden``: added to the encoded observation, ``act(x + W a)`` (DDPG's
    critic), the action meeting the state in one nonlinearity."""
    max_grad_norm: PositiveFloat | None = None
    """Global gradient-norm clip of each of the three optimisers (None: no clipping, as in
    SAC)."""
    reset_every: PositiveInt | None = None
    """Gradient steps between periodic resets of the agent (None: never reset). After every
    ``reset_every``-th gradient step of the run, what ``reset`` names is re-initialised as the
    learner built it at the start, and training goes on from the replay, which is kept whole.
    Resets undo the primacy bias (Nikishin et al. 2022, "The Primacy Bias in Deep RL"): networks
    trained many gradient steps on the first data lose the ability to fit later data, and the
    more gradient steps per env step, the sooner; with resets the replay ratio can go well above
    one gradient step per env step and keep paying (D'Oro et al. 2023, "Sample-Efficient RL by
    Breaking the Replay Ratio Barrier"; BRO, Nauman et al. 2024). Counted in gradient steps, as
    D'Oro et al. count it: the overfitting grows with the updates, so a schedule in gradient
    steps holds its meaning at any ``replay_ratio`` (a higher ratio resets more often per env
    step); the counter is the checkpointed ``gradient_steps``, so a resumed run keeps the
    schedule. Each reset is counted in the ``sac/resets`` metric."""
    reset: Literal["all", "networks"] = "all"
    """What a reset (``reset_every``) re-initialises; without ``reset_every`` it has no effect (a
    resolved config, which writes every field, carries it either way). ``networks``: the policy
    (every task's encoder and head, the shared torso), both critics (the same) with their target
    copies set equal to the new critics, and the Adam moments and step counts of the policy's and
    critics' optimisers. ``all`` (the default): the networks and, as the papers' code re-creates the
    whole agent, every task's temperature (back to ``initial_alpha``) and, with
    ``learner.multitask.loss_weighting: famo``, FAMO's task logits, each with its optimiser's state.
    Always kept: the replay, the batch mix, the replay ratio's carry, the step counters and the
    policy version (which goes up, so the actors act with the new weights)."""
    draw_on_device: bool | None = None
    """Mirror the replay in the learner device's memory and draw each gradient step's batch
    there, so that only the batch's per-task counts cross from the host per step (the host
    replay stays the one of record: checkpoints read it). None: on a CUDA GPU whose step is
    replayed as a CUDA graph, where the mirror takes at most a quarter of the device's free
    memory (it takes as many bytes as the host replay). True: wherever the tasks take the
    stacked step with uniform replay on one process (a CPU too); False: never. The rows come
    from the device's random generator, the same distribution as the host's draw."""
    normalize_obs: bool = False
    """Normalise each task's float vector observations (a ``Box`` of any rank but an image's)
    by their running mean and variance, per task, clipped to ±10 (as Stable-Baselines3's
    ``VecNormalize`` and BRO do): the statistics take in every unroll's observations as it is
    stored in the replay, and every network reads ``(obs − mean) / sqrt(var + 1e-8)`` — the
    critics and the policy in the learner's step, the actors' policy through the published
    weights (the statistics are buffers of the model), checkpoints hold them. The replay keeps
    the raw observations, so each gradient step sees them under the current statistics. Images,
    integers scaled by their bounds, text, Dict and Tuple observations are left as they are."""
    critic: Literal["mse", "categorical"] = "mse"
    """The critics' output and loss. ``mse``: one ``Q`` per action, the squared error to the
    soft target (SAC's). ``categorical``: logits over ``num_bins`` values evenly spaced on
    ``[v_min, v_max]``, ``Q`` their expectation; the soft target (from the smaller of the
    target critics' expected ``Q``, as SAC takes it) is projected onto the two neighbouring
    bins (two-hot, preserving its value inside the support) and each critic's loss is the cross
    entropy to it (BRC, Nauman et al. 2025; Farebrother et al. 2024)."""
    num_bins: int = Field(default=101, ge=2)
    """Bins of the ``categorical`` critic (BRC's 101)."""
    v_min: float = -100.0
    """The ``categorical`` critic's smallest value: soft targets below it count as it. The
    support must hold the tasks' discounted soft returns *after* ``tasks[i].reward_scale``:
    ±100 holds rewards in about [−1, 1] at ``gamma: 0.99``; scale each task's rewards into it."""
    v_max: float = 100.0
    """The ``categorical`` critic's largest value (above ``v_min``): soft targets above it
    count as it."""

    @model_validator(mode="after")
    def _support(self) -> SacSettings:
        """The categorical critic's support is an interval."""
        if not self.v_max > self.v_min:
            raise ValueError(
                f"v_max ({self.v_max:g}) must be above v_min ({self.v_min:g}): they bound the "
                "categorical critic's support"
            )
        return self


SAC_LEARNER_DEFAULTS: dict[str, object] = {
    "unroll_length": 8,
    "batch_size": 1,
    "model": {"encoder_layers": 1, "torso": [256]},
}
"""SAC's own ``learner`` defaults (a config's own keys win). The model: a vector task's input
goes through its encoder's one 256-wide layer and the shared torso's one, so one task's actor
and critics have the two 256-wide hidden layers of Stable-Baselines3's and CleanRL's SAC (the
actor-critic default, two encoder layers and a two-layer torso, costs SAC about three times
the arithmetic per gradient step: docs/ALGORITHMS.md). The unroll: an update on every unroll
of 8 steps, so the actors act with weights at most 8 of their steps old (the actor-critic's
32 columns of 20 steps would leave one env acting 640 steps on the same weights); how many
gradient steps an update takes is ``replay_ratio``'s business, not the unroll's."""
