"""Measure the random-policy score of each scisim env as the plugin registers it.

A uniformly random policy (heat1d: intensities uniform in [-1, 1]; epidemic: one of the three
interventions uniformly each day) with the default kwargs; prints the mean undiscounted return
of the first ``--episodes`` finished episodes and its standard error.

    .venv/bin/python plugins_contrib/mtrl-scisim/scripts/measure_random_scores.py
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

from mtrl.plugins import BatchEnv, make_env


def random_actions(space: gym.Space, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` uniform actions from a Discrete or Box space, drawn from ``rng``."""
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, n)
    return rng.uniform(space.low, space.high, (n, *space.shape)).astype(space.dtype)


def random_score(env: BatchEnv, episodes: int, seed: int) -> tuple[float, float]:
    """(mean return, standard error) of ``episodes`` random-policy episodes."""
    rng = np.random.default_rng(seed)
    env.reset()
    ret = np.zeros(env.num_envs)
    prev_done = np.zeros(env.num_envs, bool)
    returns: list[float] = []
    while len(returns) < episodes:
        out = env.step(random_actions(env.single_action_space, env.num_envs, rng))
        ret = np.where(prev_done, 0.0, ret + out.reward)
        done = out.terminated | out.truncated
        returns.extend(ret[done].tolist())
        prev_done = done
    r = np.asarray(returns[:episodes])
    return float(r.mean()), float(r.std(ddof=1) / np.sqrt(len(r)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--num-envs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for env_id in ("scisim/heat1d", "scisim/epidemic"):
        env = make_env(env_id, num_envs=args.num_envs, seed=args.seed)
        mean, sem = random_score(env, args.episodes, args.seed)
        print(f"{env_id:16s} random score {mean:9.3f} ± {sem:.3f}")


if __name__ == "__main__":
    main()
