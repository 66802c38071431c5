"""A population of a replay-based rule keeps each member's replay across exploit and explore.

PBT restarts members from checkpoints: a synchronous population restarts every member at each
meeting, and an exploit restarts the copying member from the better member's checkpoint. A
checkpoint without the replay's contents (``checkpoint.replay: false``, a plain run's default:
checkpoints the size of the model) leaves every restarted member refilling its replay (SAC,
for one, trains again only once each task holds ``learner.sac.learning_starts`` transitions)
after every interval. So ``mtrl tune`` turns ``checkpoint.replay`` on for a rule whose
registration says it keeps a replay (``replay_bytes``) unless the config sets it itself, and
says so once: a member that copies another then trains on with the other's replay (the whole
state, as PBT means to copy).
"""

from __future__ import annotations

from mtrl.config import ExperimentConfig

__all__ = ["keep_replay"]


def keep_replay(cfg: ExperimentConfig, has_replay: bool) -> tuple[ExperimentConfig, str | None]:
    """``cfg`` with ``checkpoint.replay`` on when its rule keeps a replay (``has_replay``: the
    rule's :attr:`~mtrl.plugins.algorithm_registrar.AlgorithmSpec.has_replay`) and the config
    leaves the setting at its default, and the line that says so; else ``cfg`` unchanged and
    None (an explicit ``checkpoint.replay: false`` is kept: each restart then refills)."""
    if not has_replay or cfg.checkpoint.replay:
        return cfg, None
    if "replay" in cfg.checkpoint.model_fields_set or not cfg.checkpoint.enabled:
        return cfg, None
    data = cfg.model_dump(mode="json")
    data["checkpoint"]["replay"] = True
    kept = ExperimentConfig.model_validate(data)  # sets the learner's own copy of the flag
    note = (
        f"checkpoint.replay: true for this population (learner.algorithm: "
        f"{cfg.learner.algorithm}): members keep their replay across PBT's restarts and "
        "copies instead of refilling it every interval; checkpoints hold each task's replay "
        "(set checkpoint.replay: false for checkpoints the size of the model)"
    )
    return kept, note
