"""What IMPALA accepts of a config (:func:`check_config`, registered as the rule's ``checks``,
so the host runs it when the config is parsed and again before the learner is built), and the
one refusal it shares with IMPALA with replay (:func:`loss_weighting_problem`)."""

from __future__ import annotations

from typing import Any

from mtrl.config import LearnerConfig

__all__ = ["check_config", "loss_weighting_problem"]


def loss_weighting_problem(cfg: LearnerConfig, rule: str) -> list[str]:
    """``learner.multitask.loss_weighting: famo`` refused for rule ``rule``, whose loss is a
    policy gradient: FAMO weighs tasks by how fast their losses fall, which needs positive
    losses that measure progress, while a policy-gradient loss takes its sign and size from
    the advantages (empty: no FAMO asked)."""
    if cfg.multitask.loss_weighting == "none":
        return []
    return [
        f"learner.multitask.loss_weighting: {cfg.multitask.loss_weighting} is not supported by "
        f"{rule} (its policy-gradient loss is not positive and does not measure a task's "
        "progress): use loss_weighting: none, or learner.algorithm: sac"
    ]


def check_config(cfg: LearnerConfig, settings: Any = None) -> list[str]:
    """What ``impala`` cannot run of learner config ``cfg`` (empty: nothing): FAMO's loss
    weighting (:func:`loss_weighting_problem`). ``settings``: None (IMPALA has no section of
    its own)."""
    return loss_weighting_problem(cfg, "impala")
