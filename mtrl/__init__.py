"""mtrl: one deep-RL agent trained on many heterogeneous tasks at once, with massive parallelism."""

__version__ = "0.1.0"
