"""What a SAC learner's checkpoint holds (networks, optimisers, temperatures, the replay
ratio's carry, the batch mix, the sampling RNG, FAMO's task logits and their optimiser when
FAMO weighs the critic losses and, with ``checkpoint.replay``, every task's replay), and putting
it back. The periodic resets' schedule (``learner.sac.reset_every``) needs nothing of its own:
it is the gradient-step count's.

The actor's and critics' optimiser states are kept per named parameter of the model and the
critics (:mod:`mtrl.learner.named_optim_state`), not by position in the optimiser's list: the
stacked step's optimisers step stacks that the per-task modules alias, the per-task step the
modules themselves, and a checkpoint taken by either resumes in the other (a run trained on a
GPU, where every learner takes the stacked step, resumed on a CPU, where some do not).
Checkpoints that hold torch's positional states load where the layout is the one they were
saved with, and say which tensor does not fit where it is not."""

from __future__ import annotations

from typing import Any

import torch

from mtrl.errors import UserError
from mtrl.learner.named_optim_state import (
    BY_NAME,
    check_positional,
    load_named_state,
    named_state,
)

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
        "actor_optimizer": named_state(learner.actor_opt, learner.model.named_parameters()),
        "critic_optimizer": named_state(learner.critic_opt, learner.critic.named_parameters()),
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
    _load_optimizer(
        learner.actor_opt, learner.model.named_parameters(), state["actor_optimizer"], "actor"
    )
    _load_optimizer(
        learner.critic_opt, learner.critic.named_parameters(), state["critic_optimizer"], "critic"
    )
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


def _load_optimizer(
    opt: torch.optim.Optimizer, named: Any, saved: dict[str, Any], which: str
) -> None:
    """One optimiser's saved state into ``opt``: by name, or by position where an older
    checkpoint kept it so and its layout is ``opt``'s (a UserError naming what differs where
    it is not)."""
    try:
        if BY_NAME in saved:
            load_named_state(opt, named, saved)
            return
        check_positional(opt, saved)
    except ValueError as e:
        raise UserError(
            f"the checkpoint's SAC {which} optimiser state does not fit this learner: {e}"
        ) from None
    opt.load_state_dict(saved)
