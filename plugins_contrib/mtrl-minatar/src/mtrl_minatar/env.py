"""A batch of MinAtar games behind mtrl's :class:`~mtrl.plugins.BatchEnv` contract.

MinAtar (Young & Tian 2019, "MinAtar: An Atari-inspired testbed for thorough and reproducible
reinforcement learning experiments") renders each game as a 10x10 grid of boolean channels.
This module steps ``num_envs`` :class:`minatar.Environment` instances in one process:

* observations are channel-first ``uint8`` in ``{0, 1}`` of shape ``(C, 10, 10)``, the layout
  convolutional encoders expect (like Atari's ``(4, 84, 84)`` frame stacks);
* actions index the game's *minimal* action set and are mapped to MinAtar's six full actions;
* sticky actions (probability ``sticky_action_prob``, MinAtar's default 0.1) are applied by
  MinAtar itself, so the dynamics are stochastic given the seed;
* ``max_episode_steps`` cuts long episodes: that step reports ``truncated`` (bootstrap), never
  ``terminated``; a game that ends on the same step reports ``terminated`` only;
* next-step auto-reset: the step after an episode end ignores the action, resets the copy and
  returns its first observation with reward 0 and both flags false;
* copy ``i`` draws all its randomness from ``numpy.random.RandomState(seed + i)``.

A Python loop over copies is unavoidable (MinAtar games are pure-Python objects); a step costs
a few microseconds per copy.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from mtrl.plugins import BatchEnv, StepBatch

#: game -> (number of channels, size of the minimal action set), as MinAtar 1.0.15 defines them.
#: Registration declares spaces from this table without importing MinAtar; the conformance
#: suite's ``build`` check fails if MinAtar ever disagrees.
GAMES: dict[str, tuple[int, int]] = {
    "asterix": (4, 5),
    "breakout": (4, 3),
    "freeway": (7, 3),
    "seaquest": (10, 6),
    "space_invaders": (6, 4),
}
GRID = 10


def observation_space(game: str) -> gym.spaces.Box:
    """``Box(0, 1, (C, 10, 10), uint8)`` for ``game``."""
    channels, _ = GAMES[game]
    return gym.spaces.Box(0, 1, (channels, GRID, GRID), np.uint8)


def action_space(game: str) -> gym.spaces.Discrete:
    """``Discrete(len(minimal action set))`` for ``game``."""
    return gym.spaces.Discrete(GAMES[game][1])


class MinAtarBatchEnv(BatchEnv):
    """``num_envs`` copies of one MinAtar game with next-step auto-reset and a time limit."""

    def __init__(
        self,
        game: str,
        num_envs: int,
        seed: int = 0,
        *,
        sticky_action_prob: float = 0.1,
        difficulty_ramping: bool = True,
        max_episode_steps: int | None = 10_000,
        copy: bool = True,
    ) -> None:
        """Build and seed the copies.

        ``copy=False`` returns the env's preallocated output arrays themselves (overwritten by
        the next step); the default hands out copies, which are safe to keep.
        """
        if game not in GAMES:
            raise ValueError(f"unknown MinAtar game {game!r}; choose one of {sorted(GAMES)}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if not 0.0 <= sticky_action_prob <= 1.0:
            raise ValueError(f"sticky_action_prob must be in [0, 1], got {sticky_action_prob}")
        if max_episode_steps is not None and max_episode_steps < 1:
            raise ValueError(
                f"max_episode_steps must be a positive int or None, got {max_episode_steps}"
            )
        from minatar import Environment  # heavy-ish import kept out of plugin registration

        self.game = game
        self.num_envs = num_envs
        self.max_episode_steps = max_episode_steps
        self.single_observation_space = observation_space(game)
        self.single_action_space = action_space(game)
        self._copy = copy
        self._games = []
        for i in range(num_envs):
            env = Environment(
                game, sticky_action_prob=sticky_action_prob, difficulty_ramping=difficulty_ramping
            )
            env.seed(seed + i)  # MinAtar shares one RandomState between wrapper and game
            self._games.append(env)
        minimal = self._games[0].minimal_action_set()
        if len(minimal) != self.single_action_space.n:
            raise RuntimeError(
                f"MinAtar's {game} has {len(minimal)} minimal actions, mtrl-minatar expected "
                f"{self.single_action_space.n}; this MinAtar version is not supported"
            )
        #: minimal-set index -> MinAtar full action index
        self.action_map = np.asarray(minimal, dtype=np.int64)
        self._obs = np.zeros((num_envs, *self.single_observation_space.shape), np.uint8)
        self._reward = np.zeros(num_envs, np.float32)
        self._terminated = np.zeros(num_envs, bool)
        self._truncated = np.zeros(num_envs, bool)
        self._elapsed = np.zeros(num_envs, np.int64)
        self._needs_reset = np.ones(num_envs, bool)
        self._started = False
        self._closed = False

    def _reset_copy(self, i: int) -> None:
        env = self._games[i]
        env.reset()
        env.last_action = 0  # a new episode starts with no remembered (sticky) action
        self._elapsed[i] = 0
        self._write_obs(i)

    def _write_obs(self, i: int) -> None:
        # (10, 10, C) bool -> (C, 10, 10) uint8, written into the preallocated buffer
        self._obs[i] = self._games[i].state().transpose(2, 0, 1)

    def _out(self, arr: np.ndarray) -> np.ndarray:
        return arr.copy() if self._copy else arr

    def reset(self) -> np.ndarray:
        """Start a new episode in every copy and return the first observations."""
        for i in range(self.num_envs):
            self._reset_copy(i)
        self._needs_reset[:] = False
        self._started = True
        return self._out(self._obs)

    def step(self, actions: Any) -> StepBatch:
        """Act in every copy (indices into the minimal action set), auto-resetting ended ones."""
        if not self._started:
            raise RuntimeError(f"minatar/{self.game}: call reset() before step()")
        acts = np.asarray(actions)
        n_act = self.single_action_space.n
        if acts.shape != (self.num_envs,) or not np.issubdtype(acts.dtype, np.integer):
            raise ValueError(
                f"minatar/{self.game}: actions must be integers of shape ({self.num_envs},), "
                f"got {acts.dtype} {acts.shape}"
            )
        if acts.min() < 0 or acts.max() >= n_act:
            raise ValueError(
                f"minatar/{self.game}: actions must be in [0, {n_act}), got {acts.tolist()}"
            )
        full = self.action_map[acts]
        self._reward[:] = 0.0
        self._terminated[:] = False
        self._truncated[:] = False
        for i in range(self.num_envs):
            if self._needs_reset[i]:
                self._reset_copy(i)
                continue
            reward, done = self._games[i].act(int(full[i]))
            self._elapsed[i] += 1
            self._reward[i] = reward
            self._terminated[i] = done
            self._write_obs(i)
        if self.max_episode_steps is not None:
            # elapsed is 0 on reset steps, so a reset step is never cut
            self._truncated[:] = (self._elapsed >= self.max_episode_steps) & ~self._terminated
        self._needs_reset[:] = self._terminated | self._truncated
        return StepBatch(
            obs=self._out(self._obs),
            reward=self._out(self._reward),
            terminated=self._out(self._terminated),
            truncated=self._out(self._truncated),
        )

    def close(self) -> None:
        """Drop the games (MinAtar holds no native resources). Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._games = []
