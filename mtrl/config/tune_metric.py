"""Whether a config's tasks can be ranked by its ``tune.metric``.

``normalized_score`` ranks a population by each task's return on the scale random = 0,
reference = 1, which exists only for envs that register both scores (``mtrl envs`` shows
them). Parsing a config cannot tell (the scores are the plugins'), so ``mtrl validate`` and
``mtrl tune`` ask here with the registry's answer before any member starts: otherwise the
first member to rank its tasks fails inside Ray, minutes in.
"""

from __future__ import annotations

from collections.abc import Callable

from mtrl.config.loading import Loc
from mtrl.config.models import ExperimentConfig

__all__ = ["tune_metric_problems"]


def tune_metric_problems(
    cfg: ExperimentConfig, has_reference: Callable[[str], bool]
) -> list[tuple[Loc, str]]:
    """``(YAML path, message)`` for a ``tune.metric`` the tasks cannot give; ``has_reference``
    says whether an env id registers a random and a reference score."""
    if cfg.tune is None or cfg.tune.metric != "normalized_score":
        return []
    missing = [f"tasks[{i}] ({t.env})" for i, t in enumerate(cfg.tasks) if not has_reference(t.env)]
    if not missing:
        return []
    return [
        (
            ("tune", "metric"),
            f"normalized_score needs a random and a reference score registered by every task's "
            f"env; {', '.join(missing)} has none: use tune.metric: target (each task's "
            "target_score) or return",
        )
    ]
