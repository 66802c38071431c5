"""The textbook barostat as the baseline: a PI controller on the relative pressure error.

    python -m mtrl_lammps.baseline [--episodes 20] [--json OUT]

Berendsen's barostat scales the box in proportion to the pressure error (a P controller); an
integral term removes its steady offset. Here ``a = clip(Kp e + Ki Σe, -1, 1)`` with
``e = P/P* - 1`` (too high a pressure: expand). The gains are tuned by grid search on episodes
of their own (seeds 1000 and up), then the best pair is measured on seeds 0 ... N-1, beside
uniform random actions and doing nothing, through the same :class:`BarostatTask` the agent's
env serves (one process, one rank). Printed: mean ± std of the episode return (mtrl's score
for the task) and of the final relative pressure error.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mtrl_lammps.task import BarostatTask

KP = (0.5, 1.0, 2.0, 4.0, 8.0)
KI = (0.0, 0.1, 0.3, 1.0)
TUNING_SEED = 1000

#: controller(obs [n, 6], integral state [n]) -> actions [n]
Controller = Callable[[np.ndarray, np.ndarray], np.ndarray]


def pi(kp: float, ki: float) -> Controller:
    def act(obs: np.ndarray, integral: np.ndarray) -> np.ndarray:
        integral += obs[:, 0]
        return np.clip(kp * obs[:, 0] + ki * integral, -1.0, 1.0)

    return act


def play(controller: Controller, episodes: int, seed: int, rng_seed: int = 0) -> dict[str, Any]:
    """One episode per copy of ``episodes`` copies (copy ``i`` seeded ``seed + i``)."""
    task = BarostatTask()
    task.hello(episodes, seed)
    try:
        obs = task.reset()
        integral = np.zeros(episodes)
        returns = np.zeros(episodes)
        keep = np.zeros(episodes, bool)
        for _ in range(task.settings.horizon):
            actions = controller(obs, integral).reshape(-1, 1).astype(np.float32)
            obs, rewards, _, _ = task.step(actions, keep)
            returns += rewards
    finally:
        task.close()
    final_error = np.abs(obs[:, 0])
    return {"returns": returns.tolist(), "final_relative_error": final_error.tolist()}


def _stat(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    from mpi4py import MPI  # noqa: F401 - loads libmpi before LAMMPS needs it

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20, help="episodes per controller")
    parser.add_argument("--tuning-episodes", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    tuning = {
        (kp, ki): statistics.fmean(play(pi(kp, ki), args.tuning_episodes, TUNING_SEED)["returns"])
        for kp, ki in itertools.product(KP, KI)
    }
    (kp, ki), _ = max(tuning.items(), key=lambda kv: kv[1])
    rng = np.random.default_rng(0)
    controllers: dict[str, Controller] = {
        f"PI (Kp={kp}, Ki={ki})": pi(kp, ki),
        "P only (Berendsen)": pi(max(KP, key=lambda p: tuning[(p, 0.0)]), 0.0),
        "random": lambda obs, _: rng.uniform(-1, 1, len(obs)),
        "zero": lambda obs, _: np.zeros(len(obs)),
    }
    table = {}
    for name, controller in controllers.items():
        out = play(controller, args.episodes, 0)
        table[name] = {
            "return": _stat(out["returns"]),
            "final_relative_error": _stat(out["final_relative_error"]),
        }
        r, e = table[name]["return"], table[name]["final_relative_error"]
        print(
            f"{name:<24} return {r['mean']:8.2f} ± {r['std']:5.2f}   "
            f"final |P/P*-1| {e['mean']:.3f} ± {e['std']:.3f}"
        )
    if args.json:
        doc = {
            "episodes": args.episodes,
            "tuning": {f"{k[0]},{k[1]}": v for k, v in tuning.items()},
            "controllers": table,
        }
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
