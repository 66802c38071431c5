"""mtrl-heat: an MPI-parallel C heat-equation code as an mtrl env (``heat/heat2d``)."""

__version__ = "0.1.0"
