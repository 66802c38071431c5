"""Step cost of the scisim envs: heat1d against grid size, epidemic's random step times.

Not a test (timings are machine-dependent). Prints milliseconds per batched step of heat1d for
growing ``n`` (expect roughly linear growth) and the spread of epidemic step times and event
counts under the exact Gillespie method.

    .venv/bin/python plugins_contrib/mtrl-scisim/scripts/time_step_cost.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mtrl_scisim.epidemic import EpidemicBatchEnv
from mtrl_scisim.heat import Heat1DBatchEnv


def time_heat(num_envs: int, sizes: list[int], steps: int) -> None:
    """Print ms per step of ``num_envs`` rods for each grid size."""
    for n in sizes:
        env = Heat1DBatchEnv(num_envs, 0, n=n)
        env.reset()
        action = np.zeros((num_envs, env.single_action_space.shape[0]), np.float32)
        env.step(action)
        t0 = time.perf_counter()
        for _ in range(steps):
            env.step(action)
        ms = (time.perf_counter() - t0) / steps * 1e3
        print(f"heat1d n={n:7d}: {ms:9.3f} ms/step ({num_envs} copies)")


def time_epidemic(num_envs: int, population: int, steps: int) -> None:
    """Print quantiles of per-step wall time and events of unmitigated epidemics."""
    env = EpidemicBatchEnv(num_envs, 0, population=population)
    env.reset()
    times, events = [], []
    action = np.zeros(num_envs, np.int64)
    for _ in range(steps):
        t0 = time.perf_counter()
        env.step(action)
        times.append(time.perf_counter() - t0)
        events.append(env.last_events.sum())
    q = np.quantile(np.asarray(times) * 1e3, [0.1, 0.5, 0.9, 1.0])
    e = np.quantile(events, [0.1, 0.5, 0.9, 1.0])
    print(
        f"epidemic N={population}: step ms p10/p50/p90/max = {np.round(q, 3).tolist()}; "
        f"events per step = {e.tolist()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    time_heat(args.num_envs, [64, 256, 1024, 4096, 16384, 65536], args.steps)
    for population in (1_000, 100_000):
        time_epidemic(args.num_envs, population, 200)


if __name__ == "__main__":
    main()
