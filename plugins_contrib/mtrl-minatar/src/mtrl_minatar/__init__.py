"""mtrl-minatar: MinAtar's miniature Atari games as batched mtrl environments.

Installed, it registers ``minatar/<game>`` for breakout, asterix, freeway, seaquest and
space_invaders through the ``mtrl`` entry-point group (module :mod:`mtrl_minatar.plugin`).
"""

from mtrl_minatar.env import GAMES, MinAtarBatchEnv

__all__ = ["GAMES", "MinAtarBatchEnv"]
__version__ = "0.1.0"
