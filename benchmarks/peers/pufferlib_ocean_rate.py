"""PufferLib's own C envs (Ocean) stepped raw: env steps per second with random actions.

Runs in the ``pufferlib_ocean`` peer venv (``venvs.py``; PufferLib 3.0.0 built from its sdist)::

    .venv/bin/python benchmarks/peers/venvs.py pufferlib_ocean
    benchmarks/peers/.venvs/pufferlib_ocean/bin/python benchmarks/peers/pufferlib_ocean_rate.py \\
        [--env puffer_cartpole] [--num-envs 1024] [--seconds 3]

One process, one thread: the vectorised C env (``pufferlib.ocean.environment.env_creator``)
steps ``--num-envs`` copies per call, actions drawn once from the action space and reused (the
rate of the simulation and its Python binding, nothing else). Prints the figure and writes
``docs/results/pufferlib_ocean_rate_<env>.json``. The ceiling an RL system on such an env can
approach on one core.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from pufferlib.ocean.environment import env_creator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import machine, write_result


def measure(env_name: str, num_envs: int, seconds: float) -> dict[str, float]:
    """Env steps per second of ``env_name`` with ``num_envs`` copies, over ``seconds``."""
    env = env_creator(env_name)(num_envs=num_envs, seed=0)
    env.reset(seed=0)
    space = env.single_action_space
    actions = np.stack([space.sample() for _ in range(num_envs)])
    env.step(actions)  # first call outside the clock
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        env.step(actions)
        calls += 1
    env.close()
    return {"calls": calls, "seconds": elapsed, "env_steps_per_s": calls * num_envs / elapsed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="puffer_cartpole")
    ap.add_argument("--num-envs", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--out-dir", type=Path, default=None)
    a = ap.parse_args()
    got = measure(a.env, a.num_envs, a.seconds)
    print(f"{a.env}, {a.num_envs} envs: {got['env_steps_per_s'] / 1e6:.1f}M env steps/s")
    result = {"machine": machine(), "env": a.env, "num_envs": a.num_envs, **got}
    path = write_result(f"pufferlib_ocean_rate_{a.env}", result, a.out_dir)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
