"""Learning rules: each composes the shared pieces of :mod:`mtrl.learner` (encoders, torso,
heads, PopArt, distributions, optimiser, schedules) into a
:class:`~mtrl.learner.protocol.Learner`, and is offered through the
``mtrl_register_algorithms`` hook like a third party's (``learner.algorithm`` names it).

:func:`make_learner` builds the configured rule for this process.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from mtrl.config import LearnerConfig
from mtrl.errors import ConfigError
from mtrl.learner.distributed import DistContext
from mtrl.learner.protocol import Learner
from mtrl.plugins import Plugins

__all__ = ["make_learner"]


def make_learner(
    plugins: Plugins,
    model: nn.Module,
    cfg: LearnerConfig,
    task_names: Sequence[str],
    ctx: DistContext,
    device: torch.device | None,
    lr_scales: Sequence[float] | None = None,
) -> Learner:
    """The ``learner.algorithm`` rule for ``model`` in this process (a
    :class:`~mtrl.plugins.algorithm_registrar.UnknownAlgorithmError` names the known ones);
    a factory that returns something else than a :class:`Learner` is a plugin error.

    A rule with settings gets its ``learner.<rule>:`` section validated (the model's defaults
    when the config has none) as the factory's seventh argument. The rule's own config checks
    run here too, for a config that was not parsed with them (built in code): a problem
    raises :class:`~mtrl.errors.ConfigError`, one line each."""
    spec = plugins.algorithms.get(cfg.algorithm)
    settings = spec.resolve_settings(cfg)
    problems = spec.problems(cfg)
    if problems:
        raise ConfigError("\n".join(problems), problems=problems)
    if spec.settings is None:
        learner = spec.factory(model, cfg, task_names, ctx, device, lr_scales)
    else:
        learner = spec.factory(model, cfg, task_names, ctx, device, lr_scales, settings)
    if not isinstance(learner, Learner):
        raise TypeError(
            f"learning rule {spec.name!r} of plugin {spec.plugin!r} returned "
            f"{type(learner).__name__}, which lacks members of mtrl.learner.protocol.Learner"
        )
    return learner
