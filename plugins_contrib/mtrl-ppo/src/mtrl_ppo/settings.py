"""PPO's own settings: the config's ``learner.ppo:`` section, validated by mtrl with this model
(a bad key or value is reported with its file and line like any other).

PPO also reads these keys of ``learner:`` itself, shared by every rule: ``learning_rate``,
``lr_schedule``, ``lr_final_fraction``, ``optimizer``, ``gamma``, ``value_coef``,
``max_grad_norm`` (PPO's usual 0.5, not IMPALA's default 40: the configs here set it),
``popart`` and ``model``; ``unroll_length`` × ``batch_size`` env steps make one update's data.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt


class PpoSettings(BaseModel):
    """Clipped-surrogate PPO over fresh unrolls: ``epochs`` passes over each batch, each in
    ``minibatches`` shuffled parts, with advantages from GAE(λ)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    clip: PositiveFloat = 0.2
    """ε of the clipped surrogate: the probability ratio π/μ counts only inside [1 − ε, 1 + ε]
    where moving further would improve the objective (Schulman et al. 2017, eq. 7)."""
    epochs: PositiveInt = 4
    """Passes over each batch of fresh unrolls (SB3's default is 10 for 2,048-step rollouts,
    CleanRL's 4)."""
    minibatches: PositiveInt = 4
    """Gradient steps per pass: the batch's samples, shuffled, in this many equal parts."""
    gae_lambda: float = Field(default=0.95, ge=0, le=1)
    """λ of generalised advantage estimation (Schulman et al. 2016): 0 is the one-step TD
    error, 1 the Monte-Carlo return minus the value."""
    value_clip: PositiveFloat | None = None
    """Clip each value prediction to within this of the one the batch was collected with
    (PPO2's value clipping), in PopArt-normalised units; None (SB3's default) leaves it free."""
    entropy_cost: float = Field(default=0.0, ge=0)
    """Weight of the policy's entropy bonus (SB3's default 0; CleanRL's 0.01). mtrl's
    ``learner.entropy_coef`` and entropy floor are IMPALA's and are not read."""
    normalize_advantages: bool = True
    """Each task's advantages to mean 0 and standard deviation 1 over the update's batch (per
    task, so that one task's reward scale does not drown another's). Off: each task's
    advantages are divided by its PopArt σ instead (by 1 without PopArt)."""
    target_kl: PositiveFloat | None = None
    """Stop an update's remaining gradient steps once the approximate KL between the policy
    the batch was collected with and the current one passes 1.5 × this (SB3's rule); None
    runs every epoch."""
