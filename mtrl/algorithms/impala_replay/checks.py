"""What IMPALA with replay accepts of a config (:func:`check_config`, registered as the rule's
``checks``, so the host runs it when the config is parsed and again before the learner is
built): its replayed sequences are drawn uniformly, so ``replay.sampler: prioritized`` is
refused in one line instead of being ignored; like IMPALA's, its policy-gradient loss refuses
FAMO's loss weighting."""

from __future__ import annotations

from mtrl.algorithms.impala.checks import loss_weighting_problem
from mtrl.algorithms.impala_replay.settings import ImpalaReplaySettings
from mtrl.config import LearnerConfig

__all__ = ["check_config"]


def check_config(cfg: LearnerConfig, settings: ImpalaReplaySettings | None = None) -> list[str]:
    """What ``impala_replay`` cannot run of learner config ``cfg`` (empty: nothing).

    Prioritized replay needs a TD error per drawn sequence fed back to its sampler and an
    importance weight per sequence on the loss; IMPALA's update (V-trace, PopArt) weighs a
    task's columns by one loss weight and returns neither, so the rule draws uniformly, as
    LASER does (V-trace's clipped importance weights already correct for the acting policy).
    FAMO's loss weighting is refused as IMPALA refuses it."""
    problems = loss_weighting_problem(cfg, "impala_replay")
    if cfg.replay.prioritized:
        problems.append(
            "learning rule 'impala_replay' draws its replayed sequences uniformly (IMPALA's "
            "update has no per-sequence TD errors or importance weights): set "
            "replay.sampler: uniform, or choose learner.algorithm: sac for prioritized replay"
        )
    return problems
