"""The ``external`` env kind: simulation codes in their own processes, coupled over ZeroMQ.

A plugin registers an :class:`ExternalSim` as an env's factory; mtrl then launches (or attaches
to) the simulation and drives it through the coupling protocol (docs/COUPLING.md). Actors and
the learner see an ordinary :class:`~mtrl.plugins.BatchEnv`. Needs ``pip install
'mtrl[external]'`` (pyzmq), imported only when such an env is built.
"""

from mtrl.plugins.external.env import ExternalBatchEnv
from mtrl.plugins.external.link import (
    SimulationCrashed,
    SimulationDisconnected,
    SimulationError,
    SimulationReportedError,
    SimulationTimeout,
)
from mtrl.plugins.external.sim import ExternalSim
from mtrl.plugins.external.spaces_check import (
    SimulationCommandError,
    SpaceMismatchError,
    spaces_from_spec,
)

__all__ = [
    "ExternalBatchEnv",
    "ExternalSim",
    "SimulationCommandError",
    "SimulationCrashed",
    "SimulationDisconnected",
    "SimulationError",
    "SimulationReportedError",
    "SimulationTimeout",
    "SpaceMismatchError",
    "spaces_from_spec",
]
