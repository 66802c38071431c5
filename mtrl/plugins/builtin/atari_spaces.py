"""Atari spaces declared up front, so listing or configuring an Atari task loads no ROM.

Both Atari backends (gymnasium's ``ALE/<Game>-v5`` through ale-py's ``AtariVectorEnv``, and
``envpool/<Game>-v5``) use the standard preprocessing: 84x84 grey frames stacked 4 deep,
channel first, and each game's *minimal* action set. Reading that set otherwise means loading
the game's ROM (about 0.2 s a game, 200+ games for ``mtrl envs``). The counts below are those
ROMs' minimal action sets (ale-py 0.12 / envpool 1.2); a game not listed keeps its spaces
found lazily by building one copy. ``tests/plugins/test_envs_listing.py`` checks them against
both backends.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

#: 4 stacked 84x84 grey frames, channel first.
ATARI_OBSERVATION_SHAPE = (4, 84, 84)

#: lower-cased game name (``"pong"``, ``"tictactoe3d"``) -> size of its minimal action set.
# fmt: off
ATARI_MINIMAL_ACTIONS: dict[str, int] = {
    "adventure": 18, "airraid": 6, "alien": 18, "amidar": 10, "assault": 7, "asterix": 9,
    "asteroids": 14, "atlantis": 4, "atlantis2": 4, "backgammon": 3, "bankheist": 18,
    "basicmath": 6, "battlezone": 18, "beamrider": 9, "berzerk": 18, "blackjack": 4, "bowling": 6,
    "boxing": 18, "breakout": 4, "carnival": 6, "casino": 4, "centipede": 18,
    "choppercommand": 18, "crazyclimber": 9, "crossbow": 18, "darkchambers": 18, "defender": 18,
    "demonattack": 6, "donkeykong": 18, "doubledunk": 18, "earthworld": 18, "elevatoraction": 18,
    "enduro": 9, "entombed": 18, "et": 18, "fishingderby": 18, "flagcapture": 18, "freeway": 3,
    "frogger": 5, "frostbite": 18, "galaxian": 6, "gopher": 8, "gravitar": 18, "hangman": 18,
    "hauntedhouse": 18, "hero": 18, "humancannonball": 18, "icehockey": 18, "jamesbond": 18,
    "journeyescape": 16, "kaboom": 4, "kangaroo": 18, "keystonekapers": 14, "kingkong": 6,
    "klax": 18, "koolaid": 9, "krull": 18, "kungfumaster": 14, "lasergates": 18, "lostluggage": 9,
    "mariobros": 18, "miniaturegolf": 18, "montezumarevenge": 18, "mrdo": 10, "mspacman": 9,
    "namethisgame": 6, "othello": 10, "pacman": 5, "phoenix": 8, "pitfall": 18, "pitfall2": 18,
    "pong": 6, "pooyan": 6, "privateeye": 18, "qbert": 6, "riverraid": 18, "roadrunner": 18,
    "robotank": 18, "seaquest": 18, "sirlancelot": 6, "skiing": 3, "solaris": 18,
    "spaceinvaders": 6, "spacewar": 18, "stargunner": 18, "superman": 18, "surround": 5,
    "tennis": 18, "tetris": 5, "tictactoe3d": 10, "timepilot": 10, "trondead": 18, "turmoil": 12,
    "tutankham": 8, "upndown": 6, "venture": 18, "videocheckers": 5, "videochess": 10,
    "videocube": 18, "videopinball": 9, "wizardofwor": 10, "wordzapper": 18, "yarsrevenge": 18,
    "zaxxon": 18,
}
# fmt: on


def atari_spaces(game: str) -> tuple[spaces.Box, spaces.Discrete] | tuple[None, None]:
    """(observation, action) space of Atari ``game`` (``"Pong"``, ``"TicTacToe3D"``) under the
    standard preprocessing; (None, None) for a game not in the table."""
    n = ATARI_MINIMAL_ACTIONS.get(game.lower())
    if n is None:
        return None, None
    return spaces.Box(0, 255, ATARI_OBSERVATION_SHAPE, np.uint8), spaces.Discrete(n)
