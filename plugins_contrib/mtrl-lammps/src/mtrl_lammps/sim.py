"""The simulation mtrl launches: ``mpiexec -n RANKS python -m mtrl_lammps.sim ADDRESS ...``.

One MPI job serves every copy of a batch env, one LAMMPS instance per copy, each spread over all
ranks (LAMMPS's domain decomposition). Rank 0 speaks mtrl's coupling protocol
(:func:`mtrl.coupling.client.serve`) and broadcasts each request to the other ranks, which
follow it in lockstep (LAMMPS commands are collective); results are global, so rank 0 answers
alone. When rank 0's loop ends (CLOSE, or mtrl gone) it tells the others to stop; if a rank dies
instead, mtrl's launcher ends the whole job (docs/COUPLING.md, "Process lifetime").
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from mtrl_lammps.fluid import FluidSettings
from mtrl_lammps.task import BarostatTask, TaskSettings


class _Leader:
    """Rank 0's side of :class:`BarostatTask`: every request is broadcast first."""

    def __init__(self, task: BarostatTask, comm: Any) -> None:
        self.task, self.comm = task, comm

    def hello(self, num_envs: int, seed: int) -> bytes:
        self.comm.bcast(("hello", (num_envs, seed)), root=0)
        return self.task.hello(num_envs, seed)

    def reset(self) -> np.ndarray:
        self.comm.bcast(("reset", None), root=0)
        return self.task.reset()

    def step(self, actions: np.ndarray, reset_mask: np.ndarray) -> Any:
        self.comm.bcast(("step", (np.asarray(actions), np.asarray(reset_mask))), root=0)
        return self.task.step(actions, reset_mask)


def follow(task: BarostatTask, comm: Any) -> None:
    """Ranks > 0: repeat rank 0's requests until it says stop."""
    while True:
        command, arg = comm.bcast(None, root=0)
        if command == "stop":
            return
        if command == "hello":
            task.hello(*arg)
        elif command == "reset":
            task.reset()
        elif command == "step":
            task.step(*arg)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mtrl_lammps.sim", description=__doc__.split("\n\n")[0])
    p.add_argument("address")
    for name, default in {**FluidSettings().__dict__, **TaskSettings().__dict__}.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    from mpi4py import MPI  # loads libmpi before LAMMPS needs it

    from mtrl.coupling import client

    comm = MPI.COMM_WORLD
    fluid = FluidSettings(**{k: getattr(args, k) for k in FluidSettings.__dataclass_fields__})
    settings = TaskSettings(**{k: getattr(args, k) for k in TaskSettings.__dataclass_fields__})
    task = BarostatTask(fluid, settings, comm)
    try:
        if comm.rank == 0:
            try:
                client.serve(_Leader(task, comm), args.address)
            finally:
                comm.bcast(("stop", None), root=0)
        else:
            follow(task, comm)
    finally:
        task.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
