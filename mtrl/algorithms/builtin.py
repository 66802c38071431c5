"""The built-in learning rules, registered through the same hook as any third party: each with
its settings model, config checks and replay memory, so the host asks the registration, never a
rule's name, what a rule needs."""

from __future__ import annotations

from mtrl.algorithms import impala_replay
from mtrl.algorithms.impala.checks import check_config as impala_checks
from mtrl.algorithms.impala.parallel import make_impala_learner
from mtrl.algorithms.impala_replay import ImpalaReplaySettings, make_impala_replay_learner
from mtrl.algorithms.impala_replay import settings as impala_replay_settings
from mtrl.algorithms.impala_replay.checks import check_config as impala_replay_checks
from mtrl.algorithms.sac import SacSettings, make_sac_learner
from mtrl.algorithms.sac import memory as sac_memory
from mtrl.algorithms.sac import settings as sac_settings
from mtrl.algorithms.sac.checks import check_config as sac_checks
from mtrl.algorithms.sac.obs_norm import prepare_model as prepare_sac_model
from mtrl.algorithms.sac.settings import SAC_LEARNER_DEFAULTS
from mtrl.plugins.algorithm_registrar import (
    PARALLEL_MODES,
    AlgorithmRegistrar,
    AlgorithmRegistry,
)
from mtrl.plugins.hookspecs import hookimpl

PLUGIN = "algorithms"
"""The name this plugin loads under (:data:`mtrl.plugins.manager.BUILTIN_PLUGINS`)."""


@hookimpl
def mtrl_register_algorithms(register: AlgorithmRegistrar) -> None:
    """Offer ``impala``: actor-critic with V-trace off-policy correction and per-task PopArt
    (:mod:`mtrl.algorithms.impala`), in every parallel mode; ``impala_replay``: the same with
    replayed unrolls mixed into every batch (:mod:`mtrl.algorithms.impala_replay`), in every
    parallel mode too; and ``sac``: multi-task soft actor-critic over a per-task replay
    (:mod:`mtrl.algorithms.sac`), on one process or data-parallel replicas."""
    register.algorithm(
        "impala",
        make_impala_learner,
        parallel=PARALLEL_MODES,
        checks=impala_checks,
        description="IMPALA actor-critic, V-trace correction, per-task PopArt (on-policy)",
    )
    register.algorithm(
        "impala_replay",
        make_impala_replay_learner,
        parallel=PARALLEL_MODES,
        settings=ImpalaReplaySettings,
        replay_bytes=impala_replay.replay_bytes,
        replay_capacity=impala_replay_settings.DEFAULT_CAPACITY,
        checks=impala_replay_checks,
        description="IMPALA with experience replay: fresh and replayed unrolls mixed, V-trace "
        "correcting both (LASER)",
    )
    register.algorithm(
        "sac",
        make_sac_learner,
        parallel=("data_parallel",),
        prepare_model=prepare_sac_model,
        settings=SacSettings,
        replay_bytes=sac_memory.replay_bytes,
        replay_capacity=sac_settings.DEFAULT_CAPACITY,
        checks=sac_checks,
        learner_defaults=SAC_LEARNER_DEFAULTS,
        description="multi-task soft actor-critic, per-task replay and temperature (off-policy)",
    )


def builtin_algorithms() -> AlgorithmRegistry:
    """The built-in rules as this plugin registers them, without loading any plugin (tools
    that document or check mtrl's own rules: the config reference page)."""
    register = AlgorithmRegistrar(PLUGIN)
    mtrl_register_algorithms(register)
    registry = AlgorithmRegistry()
    for spec in register.specs:
        registry.add(spec)
    return registry
