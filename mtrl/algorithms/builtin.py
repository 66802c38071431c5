"""The built-in learning rules, registered through the same hook as any third party."""

from __future__ import annotations

from mtrl.algorithms.impala_replay import make_impala_replay_learner
from mtrl.algorithms.sac import make_sac_learner
from mtrl.algorithms.sac.networks import install_policy_heads
from mtrl.learner.parallel import make_impala_learner
from mtrl.plugins.algorithm_registrar import PARALLEL_MODES, AlgorithmRegistrar
from mtrl.plugins.hookspecs import hookimpl


@hookimpl
def mtrl_register_algorithms(register: AlgorithmRegistrar) -> None:
    """Offer ``impala``: actor-critic with V-trace off-policy correction and per-task PopArt
    (:mod:`mtrl.learner.impala`), in every parallel mode; ``impala_replay``: the same with
    replayed unrolls mixed into every batch (:mod:`mtrl.algorithms.impala_replay`), in every
    parallel mode too; and ``sac``: multi-task soft actor-critic over a per-task replay
    (:mod:`mtrl.algorithms.sac`), on one process or data-parallel replicas."""
    register.algorithm(
        "impala",
        make_impala_learner,
        parallel=PARALLEL_MODES,
        description="IMPALA actor-critic, V-trace correction, per-task PopArt (on-policy)",
    )
    register.algorithm(
        "impala_replay",
        make_impala_replay_learner,
        parallel=PARALLEL_MODES,
        description="IMPALA with experience replay: fresh and replayed unrolls mixed, V-trace "
        "correcting both (LASER)",
    )
    register.algorithm(
        "sac",
        make_sac_learner,
        parallel=("data_parallel",),
        prepare_model=install_policy_heads,
        description="multi-task soft actor-critic, per-task replay and temperature (off-policy)",
    )
