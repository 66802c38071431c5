"""What a SAC learner's checkpoint holds (networks, optimisers, temperatures, the replay
ratio's carry, the batch mix, the sampling RNG, FAMO's task logits and their optimiser when
FAMO weighs the critic losses and, with ``checkpoint.replay``, every task's replay), and putting
it back. The periodic resets' schedule (``learner.sac.reset_every``) needs nothing of its own:
it is the gradient-step count's."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["REFILL_NOTE", "capture", "restore"]

REFILL_NOTE = (
    "replay not in the checkpoint: refilling (each task trains again once its replay holds "
    "learner.sac.learning_starts transitions; checkpoint.replay: true keeps it)"
)
"""What a run resumed from a checkpoint without replay contents says, once."""


def capture(learner: Any) -> dict[str, Any]:
    """A :class:`~mtrl.algorithms.sac.learner.SacLearner`'s state as plain data (the replay's
    tensors share its memory: save before the next update)."""
    state: dict[str, Any] = {
        "model": learner.model.state_dict(),
        "critic": learner.critic.state_dict(),
        "target_critic": learner.target.state_dict(),
        "log_alpha": learner.log_alpha.detach().clone(),
        "actor_optimizer": learner.actor_opt.state_dict(),
        "critic_optimizer": learner.critic_opt.state_dict(),
        "alpha_optimizer": learner.alpha_opt.state_dict(),
        "version": learner.version,
        "gradient_steps": learner.gradient_steps,
        "carry": learner.ratio.carry,
        "mix": torch.from_numpy(learner.mix.weighted.copy()),
        "rng": learner.rng.bit_generator.state,
    }
    if learner.famo is not None:
        state["famo"] = learner.famo.state_dict()
    if learner.cfg.checkpoint_replay:
        state["replay"] = [r.state_dict() for r in learner.replays]
    return state


def restore(learner: Any, state: dict[str, Any], quiet: bool = False) -> None:
    """Load :func:`capture`'s output; without replay contents, say so (unless ``quiet``)."""
    learner.model.load_state_dict(state["model"])
    learner.critic.load_state_dict(state["critic"])
    learner.target.load_state_dict(state["target_critic"])
    with torch.no_grad():
        learner.log_alpha.copy_(state["log_alpha"])
    learner.actor_opt.load_state_dict(state["actor_optimizer"])
    learner.critic_opt.load_state_dict(state["critic_optimizer"])
    learner.alpha_opt.load_state_dict(state["alpha_optimizer"])
    learner.version = int(state["version"])
    learner.gradient_steps = int(state["gradient_steps"])
    learner.ratio.carry = float(state["carry"])
    learner.mix.weighted[:] = state["mix"].numpy()
    learner.rng.bit_generator.state = state["rng"]
    if learner.famo is not None and "famo" in state:  # else FAMO's weights start uniform
        learner.famo.load_state_dict(state["famo"])
    if "replay" in state:
        for replay, saved in zip(learner.replays, state["replay"], strict=True):
            replay.load_state_dict(saved)
    elif not quiet:
        print(REFILL_NOTE, flush=True)
    mirror = learner.stacked.replay if learner.stacked is not None else None
    if mirror is not None:
        mirror.reload()
