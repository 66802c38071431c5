"""Measure each MinAtar game's random-policy score as mtrl-minatar registers it.

Runs a uniformly random policy over the minimal action set with the plugin's default kwargs
(sticky_action_prob=0.1, difficulty ramping, 10_000-step limit) and prints, per game, the mean
undiscounted return of the first ``--episodes`` finished episodes with its standard error.

    .venv/bin/python plugins_contrib/mtrl-minatar/scripts/measure_random_scores.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mtrl_minatar.env import GAMES, MinAtarBatchEnv


def random_score(game: str, episodes: int, num_envs: int, seed: int) -> tuple[float, float, float]:
    """(mean return, standard error, microseconds per single-env step) of a random policy."""
    env = MinAtarBatchEnv(game, num_envs, seed, max_episode_steps=10_000)
    rng = np.random.default_rng(seed)
    n_act = env.single_action_space.n
    env.reset()
    ret = np.zeros(num_envs)
    prev_done = np.zeros(num_envs, bool)
    returns: list[float] = []
    steps = 0
    t0 = time.perf_counter()
    while len(returns) < episodes:
        out = env.step(rng.integers(0, n_act, num_envs))
        steps += num_envs
        ret = np.where(prev_done, 0.0, ret + out.reward)
        done = out.terminated | out.truncated
        returns.extend(ret[done].tolist())
        prev_done = done
    us = (time.perf_counter() - t0) / steps * 1e6
    r = np.asarray(returns[:episodes])
    return float(r.mean()), float(r.std(ddof=1) / np.sqrt(len(r))), us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for game in sorted(GAMES):
        mean, sem, us = random_score(game, args.episodes, args.num_envs, args.seed)
        print(f"{game:15s} random score {mean:8.3f} ± {sem:.3f}   ({us:.1f} us/step)")


if __name__ == "__main__":
    main()
