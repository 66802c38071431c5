"""mtrl-lammps: a LAMMPS molecular-dynamics control task for mtrl (see README.md)."""

__version__ = "0.1.0"
