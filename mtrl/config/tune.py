"""The ``tune:`` section: population-based training over mtrl runs (``mtrl tune``).

A population of runs of the same config trains side by side; every ``interval_env_steps`` the
worst ``quantile`` of them copy the state of one of the best (exploit: weights, optimiser,
PopArt, scheduler) and perturb the hyperparameters of ``search`` (explore). Each entry of
``search`` names a field of the config by its dotted path (``learner.learning_rate``,
``tasks.1.learning_rate_scale``: list items by index) and the distribution its values are
drawn from::

    tune:
      population: 4
      interval_env_steps: 100000
      search:
        learner.learning_rate: {log_uniform: [1.0e-4, 3.0e-3]}
        learner.entropy_coef: {uniform: [0.001, 0.05]}
        tasks.1.learning_rate_scale: {choice: [0.5, 1, 2]}

Every path must name a numeric field, and every value a distribution can give (its bounds,
each choice) must be a valid config: :func:`search_problems` checks both when the config is
parsed, so a run of the population never fails on a value it was dealt.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, PositiveInt, model_validator

from mtrl.config.base import ConfigModel

__all__ = ["SearchDimension", "TuneConfig", "get_path", "search_values", "set_path"]


class SearchDimension(ConfigModel):
    """One hyperparameter's distribution: exactly one of ``uniform``, ``log_uniform``
    (bounds ``[low, high]``) or ``choice`` (the values)."""

    uniform: tuple[float, float] | None = None
    """``[low, high]``: values drawn uniformly between."""
    log_uniform: tuple[float, float] | None = None
    """``[low, high]``, ``low > 0``: values whose logarithm is drawn uniformly (step sizes)."""
    choice: list[float] | None = Field(default=None, min_length=1)
    """The values themselves, one drawn at a time."""

    @model_validator(mode="after")
    def _one_kind(self) -> SearchDimension:
        given = [k for k in ("uniform", "log_uniform", "choice") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of uniform: [low, high], log_uniform: [low, high] or "
                f"choice: [values] (got {', '.join(given) or 'none'})"
            )
        for kind in ("uniform", "log_uniform"):
            bounds = getattr(self, kind)
            if bounds is None:
                continue
            low, high = bounds
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ValueError(f"{kind} needs finite bounds with low < high, got {list(bounds)}")
            if kind == "log_uniform" and low <= 0:
                raise ValueError(f"log_uniform needs low > 0, got {low}")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in ("uniform", "log_uniform", "choice") if getattr(self, k) is not None)

    def extremes(self) -> list[float]:
        """The values to check against the config: both bounds, or every choice."""
        if self.choice is not None:
            return list(self.choice)
        bounds = self.uniform if self.uniform is not None else self.log_uniform
        assert bounds is not None
        return list(bounds)


class TuneConfig(ConfigModel):
    """Population-based training of this config (``mtrl tune``; module docstring)."""

    algorithm: Literal["pbt", "pb2"] = "pbt"
    """``pbt`` (Jaderberg et al. 2017): explore perturbs each value by a factor of 0.8 or 1.2,
    or redraws it; ``pb2`` (Parker-Holder et al. 2020): a Gaussian-process bandit chooses the
    new values within the bounds (``uniform`` and ``log_uniform`` dimensions only)."""
    population: int = Field(default=4, ge=2)
    """Runs trained side by side."""
    interval_env_steps: PositiveInt = 100_000
    """Env steps of each run between two exploit/explore decisions."""
    synchronous: bool = True
    """``true``: at each interval's end the runs wait for each other and are ranked at the same
    env steps (Ray Tune pauses every run that arrives first, and a paused run starts again
    from its checkpoint: its actors are restarted each interval). ``false``: asynchronous, as
    in the PBT paper: a run is ranked against the others' latest scores when it ends an
    interval, and only a run that copies a better one restarts; the others keep their actors
    and train on (less wall time between intervals; runs are compared a little apart in env
    steps)."""
    quantile: float = Field(default=0.25, gt=0, le=0.5)
    """The fraction of the population that copies from the best as much."""
    resample_probability: float = Field(default=0.25, ge=0, le=1)
    """``pbt``: the chance that explore redraws a value instead of perturbing it."""
    metric: Literal["normalized_score", "target", "return"] = "normalized_score"
    """What ranks the runs: the mean over tasks of the recent normalised score (envs that
    register a random and a reference score); ``target``: of each task's way to its own
    ``target_score``, ``(R − random) / (target − random)`` (random: the env's registered score,
    0 where it has none; every task needs a target), so tasks of very different return scales
    count alike; ``return``: of the recent mean return."""
    search: dict[str, SearchDimension] = Field(min_length=1)
    """Dotted config path -> its distribution."""

    @model_validator(mode="after")
    def _pb2_bounds(self) -> TuneConfig:
        if self.algorithm == "pb2":
            listed = [p for p, d in self.search.items() if d.choice is not None]
            if listed:
                raise ValueError(
                    f"algorithm: pb2 models continuous ranges; {', '.join(listed)} "
                    "give choices: use uniform or log_uniform, or algorithm: pbt"
                )
        return self


def _steps(path: str) -> list[str | int]:
    return [int(p) if p.isdigit() else p for p in path.split(".")]


def get_path(data: dict[str, Any], path: str) -> Any:
    """The value at dotted ``path`` of a config's plain data (KeyError/IndexError if none)."""
    node: Any = data
    for step in _steps(path):
        node = node[step]
    return node


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set dotted ``path`` of a config's plain data, making missing mappings on the way."""
    steps = _steps(path)
    node: Any = data
    for step in steps[:-1]:
        if isinstance(step, str) and isinstance(node, dict):
            node = node.setdefault(step, {})
        else:
            node = node[step]
    node[steps[-1]] = value


def search_values(tune: TuneConfig) -> dict[str, list[float]]:
    """Path -> the values to check a config with (each dimension's extremes)."""
    return {path: dim.extremes() for path, dim in tune.search.items()}
