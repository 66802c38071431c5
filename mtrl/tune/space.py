"""From a config's ``tune.search`` to Ray Tune's search space, and from a member's values back
to the config that member trains.

Ray Tune's flat keys are the dotted config paths themselves (``learner.learning_rate``), so a
member's hyperparameters read as the config fields they set. Whole-number fields get their
values rounded (PBT's perturbation multiplies by 0.8 or 1.2).
"""

from __future__ import annotations

from typing import Any

from mtrl.config import ExperimentConfig, TuneConfig
from mtrl.config.tune import SearchDimension, get_path, set_path

__all__ = ["apply", "bounds", "mutations", "param_space"]


def _tune() -> Any:
    from ray import tune

    return tune


def _domain(dim: SearchDimension) -> Any:
    tune = _tune()
    if dim.choice is not None:
        return list(dim.choice)
    if dim.log_uniform is not None:
        return tune.loguniform(*dim.log_uniform)
    assert dim.uniform is not None
    return tune.uniform(*dim.uniform)


def param_space(tc: TuneConfig) -> dict[str, Any]:
    """Each member's first values: drawn from the distributions (``choice``: uniformly)."""
    tune = _tune()
    return {
        path: tune.choice(list(dim.choice)) if dim.choice is not None else _domain(dim)
        for path, dim in tc.search.items()
    }


def mutations(tc: TuneConfig) -> dict[str, Any]:
    """PBT's ``hyperparam_mutations``: what explore perturbs or redraws from."""
    return {path: _domain(dim) for path, dim in tc.search.items()}


def bounds(tc: TuneConfig) -> dict[str, list[float]]:
    """PB2's ``hyperparam_bounds`` (continuous dimensions only: the config refuses choices)."""
    out = {}
    for path, dim in tc.search.items():
        low_high = dim.uniform if dim.uniform is not None else dim.log_uniform
        assert low_high is not None
        out[path] = list(low_high)
    return out


def apply(cfg: ExperimentConfig, values: dict[str, Any]) -> ExperimentConfig:
    """``cfg`` with the member's ``values`` (dotted path -> value) set, validated again."""
    data = cfg.model_dump(mode="json")
    for path, value in values.items():
        current = get_path(data, path)
        set_path(data, path, round(value) if isinstance(current, int) else float(value))
    return ExperimentConfig.model_validate(data)
