"""Built-in plugin: pettingzoo multi-agent games as batches of agent slots.

Install: ``pip install 'pettingzoo[classic,butterfly]' mpe2``. Envs whose packages are missing
are not offered; with no pettingzoo at all the plugin is *unavailable*.

**Parallel-API games** — ``pettingzoo/classic/rps_v2``, ``pettingzoo/mpe/<name>`` (mpe2's
homogeneous particle envs: ``simple_v3``, ``simple_spread_v3``, ``simple_reference_v3``,
``simple_formation_v1``, ``simple_line_v1``, each also as ``<name>_continuous`` with
``continuous_actions=True``) and ``pettingzoo/butterfly/<name>`` (``knights_archers_zombies_v11``
with vector observations, ``cooperative_pong_v6``, ``pistonball_v6``; headless):

* ``num_envs`` counts agent slots: ``games x agents``; slot ``g * n + j`` is agent
  ``possible_agents[j]`` of game ``g``. Each slot gets its agent's observation, action and
  reward. The agent count of the default kwargs is registered (``num_envs_multiple``), so a
  config whose ``num_envs`` is not a multiple is refused at validate; kwargs that change the
  count (``N``) are caught when the env is built (a ``ValueError`` naming the env id).
* All agents of a game must share observation and action spaces. Heterogeneous games (mpe's
  ``simple_adversary``, ``simple_tag``, ``simple_push``, ``simple_crypto``,
  ``simple_speaker_listener``, ``simple_world_comm``, ``collect_treasure``) are not registered:
  mtrl does not pad spaces.
* **A game ends for all its slots at once**, at the step where any agent is done or the game is
  truncated: agents pettingzoo marks terminated report ``terminated``; every other slot of the
  game reports ``truncated`` (its episode was cut, so the learner bootstraps from its final
  observation). The next step is the game's reset step (next-step rule: reward 0, flags false,
  first observation). So an agent that *leaves early* (killed in knights_archers_zombies) ends
  the game for everyone: the batch-env contract has no way to mark a slot as idle, and an idle
  slot kept alive would produce transitions that look genuine but are not. Knights and archers
  can be made unkillable (``killable_knights=False``, ``killable_archers=False``) to keep whole
  games. Termination wins when pettingzoo sets both flags.
* Seeding: game ``g`` first resets with ``seed + g``; its later episodes use seeds drawn from a
  generator seeded ``seed + g``.

**Turn-based board and card games** — ``pettingzoo/classic/tictactoe_v3``, ``connect_four_v3``,
``chess_v6``, ``leduc_holdem_v4``, ``texas_holdem_v4``, ``texas_holdem_no_limit_v6`` (AEC API,
two players; go is not offered: random games run for thousands of moves):

* One slot per game, played from the learner's seat against a built-in opponent. ``opponent=
  "random"`` (the only one) picks uniformly among legal moves. ``seat=0``/``1`` fixes the
  learner's index in ``possible_agents`` (seat 0 moves first in tictactoe, connect four, chess);
  the default ``seat=None`` starts game ``g`` in seat ``g % 2`` and swaps seats every episode.
* The observation is pettingzoo's ``Dict`` with the board planes (``observation``) and the
  ``action_mask`` of legal moves, as arrays. One step = the learner's move plus the opponent's
  replies. The reward is 0 until the game ends, then the learner's pettingzoo reward (+1 win,
  -1 loss, 0 draw; chips in poker).
* Illegal moves follow pettingzoo's own rule (``TerminateIllegalWrapper``): the game ends,
  ``terminated``, with reward -1 for the learner. pettingzoo's per-move warning is silenced.
* A game that ends before the learner's first move (the opponent folds in poker) holds no
  decision for the learner and is replayed. Seeding as above; the opponent's moves come from
  game ``g``'s generator too.

Spaces are registered up front for the parallel games (building one copy needs ``num_envs`` to
be a multiple of the agent count) and found lazily for the board games. They are those of the
default kwargs: kwargs that change spaces (``N``, ``continuous_actions``, ...) give a built env
whose spaces differ from the registered ones.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from gymnasium import spaces

from mtrl.errors import PluginUnavailable
from mtrl.plugins import hookimpl
from mtrl.plugins.batch_env import BatchEnv

PIP_ALL = "pip install 'pettingzoo[classic,butterfly]' mpe2"


@dataclass(frozen=True)
class _Game:
    """One registered pettingzoo game: where it lives, what it needs, what mtrl declares."""

    module: str
    pip: str  # the install command for its packages
    needs: tuple[str, ...]  # top-level modules that must be importable
    kwargs: dict[str, Any] = field(default_factory=dict)  # fixed constructor kwargs
    observation_space: spaces.Space | None = None  # parallel games: the default kwargs' spaces
    action_space: spaces.Space | None = None
    stochastic: bool | None = None
    max_episode_steps: int | None = None
    agents: int = 1  # parallel games: agents with the default kwargs (num_envs is a multiple)
    description: str = ""


_CLASSIC = {"pip": "pip install 'pettingzoo[classic]'", "needs": ("pettingzoo", "pygame")}
_MPE = {"pip": "pip install mpe2", "needs": ("pettingzoo", "mpe2", "pygame", "scipy")}
_BUTTERFLY = {
    "pip": "pip install 'pettingzoo[butterfly]'",
    "needs": ("pettingzoo", "pygame", "pymunk"),
}
_POKER = {**_CLASSIC, "needs": (*_CLASSIC["needs"], "rlcard")}


def _vec(n: int) -> spaces.Box:
    return spaces.Box(-np.inf, np.inf, (n,), np.float32)


PARALLEL: dict[str, _Game] = {
    "classic/rps_v2": _Game(
        "pettingzoo.classic.rps.rps", **_CLASSIC,
        observation_space=spaces.Discrete(4), action_space=spaces.Discrete(3),
        stochastic=False, max_episode_steps=15, agents=2,
        description="rock-paper-scissors, 2 agents; obs = opponent's last move",
    ),
    "butterfly/knights_archers_zombies_v11": _Game(
        "pettingzoo.butterfly.knights_archers_zombies.knights_archers_zombies", **_BUTTERFLY,
        observation_space=spaces.Box(-1.0, 1.0, (27, 5), np.float64),
        action_space=spaces.Discrete(6), stochastic=True, max_episode_steps=900, agents=4,
        description="4 agents, vector observations; a death ends the game (see module docs)",
    ),
    "butterfly/cooperative_pong_v6": _Game(
        "pettingzoo.butterfly.cooperative_pong.cooperative_pong", **_BUTTERFLY,
        observation_space=spaces.Box(0, 255, (280, 480, 3), np.uint8),
        action_space=spaces.Discrete(3), stochastic=True, max_episode_steps=900, agents=2,
        description="2 paddles, RGB observations",
    ),
    "butterfly/pistonball_v6": _Game(
        "pettingzoo.butterfly.pistonball.pistonball", **_BUTTERFLY,
        observation_space=spaces.Box(0, 255, (457, 120, 3), np.uint8),
        action_space=spaces.Box(-1.0, 1.0, (1,), np.float32), stochastic=True,
        max_episode_steps=125, agents=20, description="20 pistons, RGB observations; slow",
    ),
}  # fmt: skip
for _name, _obs_dim, _n_actions, _continuous_dim, _agents in (
    ("simple_v3", 4, 5, 5, 1),
    ("simple_spread_v3", 18, 5, 5, 3),
    ("simple_reference_v3", 21, 50, 15, 2),
    ("simple_formation_v1", 6, 5, 5, 4),
    ("simple_line_v1", 8, 5, 5, 4),
):
    _base = _name.rsplit("_v", 1)[0]
    for _suffix, _kwargs, _action_space in (
        ("", {}, spaces.Discrete(_n_actions)),
        (
            "_continuous",
            {"continuous_actions": True},
            spaces.Box(0.0, 1.0, (_continuous_dim,), np.float32),
        ),
    ):
        PARALLEL[f"mpe/{_name}{_suffix}"] = _Game(
            f"mpe2.{_base}.{_base}", **_MPE, kwargs=_kwargs, observation_space=_vec(_obs_dim),
            action_space=_action_space, stochastic=False, max_episode_steps=25, agents=_agents,
            description=f"mpe2 {_name}, {'continuous' if _suffix else 'discrete'} actions",
        )  # fmt: skip

BOARD: dict[str, _Game] = {
    "classic/tictactoe_v3": _Game("pettingzoo.classic.tictactoe.tictactoe", **_CLASSIC),
    "classic/connect_four_v3": _Game("pettingzoo.classic.connect_four.connect_four", **_CLASSIC),
    "classic/chess_v6": _Game(
        "pettingzoo.classic.chess.chess", _CLASSIC["pip"], (*_CLASSIC["needs"], "chess")
    ),
    **{
        f"classic/{name}": _Game(
            f"pettingzoo.classic.rlcard_envs.{name.rsplit('_v', 1)[0]}", **_POKER
        )
        for name in ("leduc_holdem_v4", "texas_holdem_v4", "texas_holdem_no_limit_v6")
    },
}


def _available(game: _Game) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in game.needs)


def _module(env_id: str, game: _Game) -> Any:
    """Import the game's module, or say which package to install."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        return importlib.import_module(game.module)
    except ImportError as e:
        raise PluginUnavailable(f"{env_id} needs {e.name}: {game.pip}") from e


def _env_fn(env_id: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> Callable[[], Any]:
    """A no-argument game factory; a bad kwarg is reported against the env id."""

    def build() -> Any:
        try:
            return factory(**kwargs)
        except TypeError as e:
            raise TypeError(f"{env_id}: bad env kwargs {kwargs}: {e}") from e

    return build


def make_parallel(num_envs: int, seed: int = 0, *, name: str, **kwargs: Any) -> BatchEnv:
    """``num_envs`` agent slots of parallel game ``name`` (``num_envs / n_agents`` games)."""
    from mtrl.plugins.adapters import batch_env_from_pettingzoo

    env_id, game = f"pettingzoo/{name}", PARALLEL[name]
    module = _module(env_id, game)
    factory = _env_fn(env_id, module.parallel_env, {**game.kwargs, **kwargs})
    return batch_env_from_pettingzoo(factory, num_envs, seed, env_id)


def make_board(
    num_envs: int,
    seed: int = 0,
    *,
    name: str,
    seat: int | None = None,
    opponent: str = "random",
    **kwargs: Any,
) -> BatchEnv:
    """``num_envs`` games of two-player game ``name``, each from the learner's seat."""
    from mtrl.plugins.pettingzoo_slots import BoardGameBatchEnv

    env_id, game = f"pettingzoo/{name}", BOARD[name]
    module = _module(env_id, game)
    factory = _env_fn(env_id, module.env, {**game.kwargs, **kwargs})
    return BoardGameBatchEnv(factory, num_envs, seed, env_id, seat=seat, opponent=opponent)


@hookimpl
def mtrl_register_envs(register: Any) -> None:
    """Offer each game whose packages are installed; imports nothing heavy (``find_spec``)."""
    if importlib.util.find_spec("pettingzoo") is None:
        raise PluginUnavailable(f"pettingzoo is not installed: {PIP_ALL}")
    for name, game in PARALLEL.items():
        if _available(game):
            register.env(
                name,
                partial(make_parallel, name=name),
                observation_space=game.observation_space,
                action_space=game.action_space,
                description=f"pettingzoo {name} (agent slots): {game.description}",
                stochastic=game.stochastic,
                max_episode_steps=game.max_episode_steps,
                num_envs_multiple=game.agents,
            )
    for name, game in BOARD.items():
        if _available(game):
            register.env(
                name,
                partial(make_board, name=name),
                description=f"pettingzoo {name} vs a random opponent (one slot per game)",
                stochastic=True,  # the opponent is random
            )
