"""mtrl-sumo: traffic-signal control on SUMO as an mtrl task (see README.md)."""

__version__ = "0.1.0"
