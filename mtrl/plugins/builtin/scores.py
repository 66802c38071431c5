"""Reference scores for normalised reporting: (random, reference) per game or task.

Atari: random and human scores as tabulated by Mnih et al. 2015 / Wang et al. 2016 (the
"human-normalised score" convention). Classic control: random-policy mean and gymnasium's
reward threshold (the score at which the task counts as solved).
"""

from __future__ import annotations

ATARI_RANDOM_HUMAN: dict[str, tuple[float, float]] = {
    "Alien": (227.8, 7127.7),
    "Amidar": (5.8, 1719.5),
    "Assault": (222.4, 742.0),
    "Asterix": (210.0, 8503.3),
    "BeamRider": (363.9, 16926.5),
    "Breakout": (1.7, 30.5),
    "Enduro": (0.0, 860.5),
    "Freeway": (0.0, 29.6),
    "MsPacman": (307.3, 6951.6),
    "Pong": (-20.7, 14.6),
    "Qbert": (163.9, 13455.0),
    "Seaquest": (68.4, 42054.7),
    "SpaceInvaders": (148.0, 1668.7),
}

CLASSIC_RANDOM_SOLVED: dict[str, tuple[float, float]] = {
    "CartPole-v1": (22.0, 475.0),
    "CartPole-v0": (22.0, 195.0),
    "Acrobot-v1": (-499.0, -100.0),
    "MountainCar-v0": (-200.0, -110.0),
    "MountainCarContinuous-v0": (-33.0, 90.0),
    "Pendulum-v1": (-1230.0, -150.0),
}


def atari_scores(game: str) -> tuple[float | None, float | None]:
    """(random, human) for an Atari game name such as ``"Pong"``; (None, None) if unlisted."""
    return ATARI_RANDOM_HUMAN.get(game, (None, None))
