"""Batch envs of agent slots over pettingzoo games.

The semantics (slot order, a game ending for all its slots at once, seeding) are documented in
:mod:`mtrl.plugins.builtin.pettingzoo_envs`; plugins reach the parallel-API path through
:func:`mtrl.plugins.batch_env_from_pettingzoo`.

:class:`ParallelSlotsBatchEnv` runs parallel-API games, one slot per agent;
:class:`BoardGameBatchEnv` runs turn-based (AEC) two-player games, one slot per game, played from
the learner's seat against a built-in opponent. Both step games one by one in Python (pettingzoo
forces that) and write into preallocated batch buffers.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import create_empty_array

from mtrl.plugins.batch_env import BatchEnv, Obs, StepBatch
from mtrl.plugins.spaces import copy_batch, write_item

_SEED_HIGH = 2**31 - 1
_MAX_REPLAYS = 1000  # games that end before the learner's first move, in a row


@contextlib.contextmanager
def quiet_pettingzoo() -> Iterator[None]:
    """Silence pettingzoo chatter while we build and step games: illegal-move warnings (the
    learner sees the -1 reward and the action mask instead), render-mode warnings of headless
    games, float64-bounds warnings of float32 Boxes.

    pettingzoo also appends every warning to ``EnvLogger.mqueue``, a list that would grow for the
    whole run; what was appended here is removed again.
    """
    from pettingzoo.utils.env_logger import EnvLogger

    logger = EnvLogger.get_logger()
    disabled, queued = logger.disabled, len(EnvLogger.mqueue)
    logger.disabled = True
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*without specifying any render mode")
            warnings.filterwarnings("ignore", message=".*precision lowered", category=UserWarning)
            yield
    finally:
        logger.disabled = disabled
        del EnvLogger.mqueue[queued:]


def _zero_step(num_envs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reward, terminated and truncated of a step, before any game fills its slots."""
    return (
        np.zeros(num_envs, dtype=np.float32),
        np.zeros(num_envs, dtype=bool),
        np.zeros(num_envs, dtype=bool),
    )


def _item(actions: Any, i: int) -> Any:
    a = actions[i]
    return a.item() if isinstance(a, np.ndarray) and a.ndim == 0 else a


class _GameSeeds:
    """Game ``g`` first resets with ``seed + g``; later resets draw seeds from a generator
    seeded ``seed + g``, so every episode is reproducible from the batch env's seed."""

    def __init__(self, seed: int, num_games: int) -> None:
        self._first: list[int | None] = [seed + g for g in range(num_games)]
        self.rngs = [np.random.default_rng(seed + g) for g in range(num_games)]

    def next(self, g: int) -> int:
        first, self._first[g] = self._first[g], None
        return first if first is not None else int(self.rngs[g].integers(_SEED_HIGH))


class ParallelSlotsBatchEnv(BatchEnv):
    """``num_envs`` agent slots: slot ``g * n_agents + j`` is agent ``possible_agents[j]`` of
    game ``g``. A game ends for all its slots at once (the first agent done ends it)."""

    def __init__(self, env_fn: Callable[[], Any], num_envs: int, seed: int, env_id: str) -> None:
        with quiet_pettingzoo():
            first = env_fn()
        self.agents: list[str] = list(first.possible_agents)
        n = len(self.agents)
        if num_envs <= 0 or num_envs % n:
            first.close()
            raise ValueError(
                f"{env_id}: num_envs counts agent slots (games x {n} agents {self.agents}); "
                f"{num_envs} is not a positive multiple of {n}"
            )
        obs_space, act_space = (
            first.observation_space(self.agents[0]),
            first.action_space(self.agents[0]),
        )
        for a in self.agents[1:]:
            if first.observation_space(a) != obs_space or first.action_space(a) != act_space:
                first.close()
                raise ValueError(
                    f"{env_id}: agents do not share spaces ({self.agents[0]}: {obs_space}, "
                    f"{act_space}; {a}: {first.observation_space(a)}, {first.action_space(a)}); "
                    "mtrl's agent slots need one observation and one action space"
                )
        self.env_id = env_id
        self.num_envs = num_envs
        self.single_observation_space: gym.Space = obs_space
        self.single_action_space: gym.Space = act_space
        with quiet_pettingzoo():
            self._games = [first] + [env_fn() for _ in range(num_envs // n - 1)]
        self._seeds = _GameSeeds(seed, len(self._games))
        self._obs = create_empty_array(obs_space, num_envs, fn=np.zeros)
        self._ended = np.zeros(len(self._games), dtype=bool)
        self._closed = False

    def _reset_game(self, g: int) -> None:
        game, base = self._games[g], g * len(self.agents)
        obs, _ = game.reset(seed=self._seeds.next(g))
        if set(game.agents) != set(self.agents):
            raise RuntimeError(
                f"{self.env_id}: game {g} started with agents {game.agents}, not "
                f"{self.agents}; agents that join mid-game are not supported"
            )
        for j, agent in enumerate(self.agents):
            write_item(self._obs, base + j, obs[agent])
        self._ended[g] = False

    def reset(self) -> Obs:
        with quiet_pettingzoo():
            for g in range(len(self._games)):
                self._reset_game(g)
        return copy_batch(self._obs)

    def step(self, actions: Any) -> StepBatch:
        actions = np.asarray(actions)
        n = len(self.agents)
        reward, terminated, truncated = _zero_step(self.num_envs)
        with quiet_pettingzoo():
            for g, game in enumerate(self._games):
                if self._ended[g]:  # next-step rule: this step is the game's reset step
                    self._reset_game(g)
                    continue
                base = g * n
                act = {a: _item(actions, base + j) for j, a in enumerate(self.agents)}
                obs, rew, term, trunc, _ = game.step(act)
                ended = not game.agents or any(term.values()) or any(trunc.values())
                for j, agent in enumerate(self.agents):
                    slot = base + j
                    if agent in obs:  # else keep the slot's last observation
                        write_item(self._obs, slot, obs[agent])
                    reward[slot] = rew.get(agent, 0.0)
                    if ended:  # done agents keep their flag; the rest are cut (truncated)
                        terminated[slot] = bool(term.get(agent, False))
                        truncated[slot] = not terminated[slot]
                self._ended[g] = ended
        return StepBatch(copy_batch(self._obs), reward, terminated, truncated)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for game in self._games:
                game.close()


class BoardGameBatchEnv(BatchEnv):
    """``num_envs`` two-player turn-based games, each seen from the learner's seat.

    The opponent moves uniformly among legal moves (``action_mask``). ``seat`` fixes the
    learner's index in ``possible_agents``; ``None`` starts game ``g`` in seat ``g % 2`` and
    swaps seats every episode.
    """

    def __init__(
        self,
        env_fn: Callable[[], Any],
        num_envs: int,
        seed: int,
        env_id: str,
        *,
        seat: int | None = None,
        opponent: str = "random",
    ) -> None:
        if opponent != "random":
            raise ValueError(f"{env_id}: opponent must be 'random', not {opponent!r}")
        if seat not in (None, 0, 1):
            raise ValueError(f"{env_id}: seat must be 0, 1 or None (alternate), not {seat!r}")
        if num_envs <= 0:
            raise ValueError(f"{env_id}: num_envs must be positive, got {num_envs}")
        with quiet_pettingzoo():
            self._games = [env_fn() for _ in range(num_envs)]
        game = self._games[0]
        self.agents: list[str] = list(game.possible_agents)
        obs_space = game.observation_space(self.agents[0])
        if (
            len(self.agents) != 2
            or not isinstance(obs_space, gym.spaces.Dict)
            or "action_mask" not in obs_space.spaces
            or game.observation_space(self.agents[1]) != obs_space
            or game.action_space(self.agents[1]) != game.action_space(self.agents[0])
        ):
            self.close()
            raise ValueError(
                f"{env_id}: board games need two agents sharing a Dict observation space with "
                "an 'action_mask'"
            )
        self.env_id = env_id
        self.num_envs = num_envs
        self.single_observation_space: gym.Space = obs_space
        self.single_action_space: gym.Space = game.action_space(self.agents[0])
        self._fixed_seat = seat
        self._seat = [seat if seat is not None else g % 2 for g in range(num_envs)]
        self._started = [False] * num_envs
        self._seeds = _GameSeeds(seed, num_envs)
        self._obs = create_empty_array(obs_space, num_envs, fn=np.zeros)
        self._ended = np.zeros(num_envs, dtype=bool)
        self._closed = False

    def learner(self, g: int) -> str:
        """The agent the learner plays in game ``g``'s current episode."""
        return self.agents[self._seat[g]]

    def _over(self, game: Any) -> tuple[bool, bool]:
        """(terminated, truncated) of the game; termination wins when pettingzoo sets both."""
        term = any(game.terminations.values())
        return term, not term and any(game.truncations.values())

    def _play_opponent(self, g: int) -> None:
        game, learner, rng = self._games[g], self.learner(g), self._seeds.rngs[g]
        while game.agent_selection != learner and not any(self._over(game)):
            mask = game.observe(game.agent_selection)["action_mask"]
            game.step(int(rng.choice(np.flatnonzero(mask))))

    def _reset_game(self, g: int) -> None:
        """Start an episode; replay games that end before the learner's first move."""
        if self._fixed_seat is None and self._started[g]:
            self._seat[g] ^= 1
        self._started[g] = True
        game = self._games[g]
        for _ in range(_MAX_REPLAYS):
            game.reset(seed=self._seeds.next(g))
            self._play_opponent(g)
            if not any(self._over(game)):
                break
        else:
            raise RuntimeError(
                f"{self.env_id}: {_MAX_REPLAYS} games in a row ended before the learner moved"
            )
        write_item(self._obs, g, game.observe(self.learner(g)))
        self._ended[g] = False

    def reset(self) -> Obs:
        with quiet_pettingzoo():
            for g in range(self.num_envs):
                self._reset_game(g)
        return copy_batch(self._obs)

    def step(self, actions: Any) -> StepBatch:
        actions = np.asarray(actions)
        reward, terminated, truncated = _zero_step(self.num_envs)
        with quiet_pettingzoo():
            for g, game in enumerate(self._games):
                if self._ended[g]:  # next-step rule: this step is the game's reset step
                    self._reset_game(g)
                    continue
                game.step(int(actions[g]))
                self._play_opponent(g)
                learner = self.learner(g)
                terminated[g], truncated[g] = self._over(game)
                if terminated[g] or truncated[g]:
                    reward[g] = game.unwrapped._cumulative_rewards[learner]
                    self._ended[g] = True
                write_item(self._obs, g, game.observe(learner))
        return StepBatch(copy_batch(self._obs), reward, terminated, truncated)

    def close(self) -> None:
        if not getattr(self, "_closed", False):
            self._closed = True
            for game in self._games:
                game.close()
