"""The registrar objects that hooks receive; they validate what plugins hand over."""

from __future__ import annotations

import math
import re
from typing import Any

import gymnasium as gym

from mtrl.plugins.spec import BatchEnvFactory, EnvSpec

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9][A-Za-z0-9_.\-]*)*$")


class EnvRegistrar:
    """Collects one plugin's environments; malformed registrations become ``problems``."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.specs: list[EnvSpec] = []
        self.problems: list[str] = []

    def env(
        self,
        name: str,
        make: BatchEnvFactory,
        *,
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
        description: str = "",
        stochastic: bool | None = None,
        step_cost_s: float | None = None,
        random_score: float | None = None,
        reference_score: float | None = None,
        max_episode_steps: int | None = None,
        num_envs_multiple: int = 1,
    ) -> None:
        """Register one environment (see :func:`mtrl.plugins.hookspecs.mtrl_register_envs`)."""
        problem = _check(
            name,
            make,
            observation_space,
            action_space,
            step_cost_s,
            random_score,
            reference_score,
            max_episode_steps,
            num_envs_multiple,
        )
        if problem:
            self.problems.append(f"env {name!r}: {problem}")
            return
        self.specs.append(
            EnvSpec(
                id=f"{self.plugin}/{name}",
                make=make,
                plugin=self.plugin,
                description=description,
                stochastic=stochastic,
                step_cost_s=step_cost_s,
                random_score=random_score,
                reference_score=reference_score,
                max_episode_steps=max_episode_steps,
                num_envs_multiple=num_envs_multiple,
                _observation_space=observation_space,
                _action_space=action_space,
            )
        )

    __call__ = env


def _check(
    name: Any,
    make: Any,
    observation_space: Any,
    action_space: Any,
    step_cost_s: Any,
    random_score: Any,
    reference_score: Any,
    max_episode_steps: Any,
    num_envs_multiple: Any,
) -> str | None:
    if not isinstance(name, str) or not _NAME.match(name):
        return "name must be a non-empty string of letters, digits, '_', '.', '-' and '/'"
    if not callable(make):
        return f"make must be callable, got {type(make).__name__}"
    for label, space in (("observation_space", observation_space), ("action_space", action_space)):
        if space is not None and not isinstance(space, gym.Space):
            return f"{label} must be a gymnasium.Space, got {type(space).__name__}"
    for label, value in (
        ("step_cost_s", step_cost_s),
        ("random_score", random_score),
        ("reference_score", reference_score),
    ):
        if value is not None and (not isinstance(value, (int, float)) or not math.isfinite(value)):
            return f"{label} must be a finite number, got {value!r}"
    if step_cost_s is not None and step_cost_s <= 0:
        return f"step_cost_s must be positive, got {step_cost_s!r}"
    if max_episode_steps is not None and (
        not isinstance(max_episode_steps, int) or max_episode_steps <= 0
    ):
        return f"max_episode_steps must be a positive int, got {max_episode_steps!r}"
    if not isinstance(num_envs_multiple, int) or num_envs_multiple < 1:
        return f"num_envs_multiple must be a positive int, got {num_envs_multiple!r}"
    return None
