"""IMPALA (``learner.algorithm: impala``): actor-critic with V-trace off-policy correction and
per-task PopArt. The update is :mod:`~mtrl.algorithms.impala.learner` (its loss
:mod:`~mtrl.algorithms.impala.loss`, its targets :mod:`~mtrl.algorithms.impala.vtrace`, the
entropy floor and ceiling :mod:`~mtrl.algorithms.impala.entropy_boost`, the per-task
diagnostics :mod:`~mtrl.algorithms.impala.diagnostics`); its replicas are
:mod:`~mtrl.algorithms.impala.data_parallel` and :mod:`~mtrl.algorithms.impala.sharding`, and
:mod:`~mtrl.algorithms.impala.parallel` picks the one a config and a process call for."""

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.algorithms.impala.parallel import make_impala_learner

__all__ = ["ImpalaLearner", "make_impala_learner"]
