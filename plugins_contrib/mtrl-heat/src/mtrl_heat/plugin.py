"""The mtrl plugin: registers ``heat/heat2d``, an external env run by ``mpiexec``.

The simulation is ``csrc/heat2d.c`` (C + MPI, coupled through mtrl's C client). It is compiled
with the ``mpich`` wheel's ``mpicc`` the first time an env is built (cached afterwards by a
hash of the source; :mod:`mtrl.coupling.cbuild`), and launched once per batch env as
``mpiexec -n {ranks} heat2d {address} ...``: one MPI job serves all the env's copies, its grid
rows split over ``ranks`` processes.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from mtrl.plugins import EnvRegistrar, PluginUnavailable, hookimpl

CSRC = Path(__file__).resolve().parent / "csrc"
HORIZON = 100

#: kwargs a config may set (``env_kwargs``), with their defaults; see README.md.
DEFAULTS: dict[str, Any] = {
    "ranks": 2,
    "n": 32,
    "alpha": 0.1,
    "dt": 0.05,
    "horizon": HORIZON,
    "action_cost": 0.01,
    "init": "steady",
}

COMMAND = (
    "{mpiexec} -n {ranks} {binary} {address} --n {n} --alpha {alpha} --dt {dt} "
    "--horizon {horizon} --cost {action_cost} --init {init}"
)


def prepare(values: dict[str, Any]) -> dict[str, Any]:
    """Compile the simulation (once; cached) and add its path as ``{binary}``."""
    from mtrl.coupling import cbuild

    exe = cbuild.build([CSRC / "heat2d.c"], "heat2d", mpi=True, cflags=("-O2",))
    return {**values, "binary": str(exe)}


def heat2d_sim() -> Any:
    """The :class:`~mtrl.plugins.external.ExternalSim` of ``heat/heat2d``."""
    from mtrl.plugins.external import ExternalSim

    return ExternalSim(command=COMMAND, defaults=DEFAULTS, prepare=prepare, step_timeout_s=60.0)


@hookimpl
def mtrl_register_envs(register: EnvRegistrar) -> None:
    """Offer the 2-D heater-control task."""
    missing = [] if importlib.util.find_spec("zmq") else ["pyzmq"]
    if not ((Path(sys.prefix) / "bin" / "mpicc").exists() or shutil.which("mpicc")):
        missing.append("mpich (mpicc, mpiexec)")
    if missing:
        raise PluginUnavailable(f"heat needs {missing}: pip install 'mtrl[external]' mpich")
    register.env(
        "heat2d",
        heat2d_sim(),
        observation_space=gym.spaces.Box(-np.inf, np.inf, (33,), np.float32),
        action_space=gym.spaces.Box(-1.0, 1.0, (4,), np.float32),
        description=(
            "2-D heat equation in C+MPI (external, domain-decomposed over `ranks`); drive the "
            "field to a target with 4 heaters"
        ),
        stochastic=False,
        max_episode_steps=HORIZON,
    )
