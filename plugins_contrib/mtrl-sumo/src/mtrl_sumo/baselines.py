"""SUMO's own signal programs (and random switching) on the task's demand, side by side.

    python -m mtrl_sumo.baselines --seeds 20 [--agent-stats FILE] [--json OUT]

Each controller plays the same ``--seeds`` demand draws (seeds 0 ... N-1) through
:class:`~mtrl_sumo.simulation.GridSimulation` (the measurement code the learning agent's env
runs): ``fixed`` (SUMO's
fixed-time plan), ``actuated`` (SUMO's gap-based actuated program) and ``random`` (the agent's
interface with uniform random actions). ``--agent-stats`` adds the episodes an agent recorded
under ``MTRL_SUMO_STATS`` (``MTRL_SUMO_STATS=FILE mtrl eval RUN_DIR``). Printed per
controller, mean ± std over episodes:

- ``return/intersection``: the task's return (minus halted vehicle-minutes) per intersection,
- ``waiting s/vehicle``: halted vehicle-seconds per vehicle that entered,
- ``throughput veh/h``: vehicles that reached their exit, per simulated hour,
- ``teleports``: vehicles SUMO removed from a jam.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from mtrl_sumo.simulation import Episode, GridSimulation
from mtrl_sumo.traffic import recorded_episodes


def play(sim: GridSimulation, seed: int, rng: np.random.Generator | None = None) -> Episode:
    """One episode; ``rng`` draws uniform random actions (``sim`` under the agent controller)."""
    sim.reset(seed)
    n, done = len(sim.intersections), False
    while not done:
        actions = rng.integers(2, size=n) if rng is not None else np.zeros(n, np.int64)
        _, _, done = sim.step(actions)
    assert sim.episode is not None
    return sim.episode


def summarise(rows: list[dict[str, Any]], intersections: int = 9) -> dict[str, Any]:
    """Mean and std over episodes of the figures in the module docstring."""

    def stat(values: list[float]) -> dict[str, float]:
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        return {"mean": statistics.fmean(values), "std": sd}

    return {
        "episodes": len(rows),
        "return_per_intersection": stat([-r["halted_s"] / 60 / intersections for r in rows]),
        "waiting_per_vehicle_s": stat([r["halted_s"] / max(r["departed"], 1) for r in rows]),
        "throughput_veh_per_h": stat([r["arrived"] * 3600 / r["seconds"] for r in rows]),
        "teleports": stat([float(r["teleports"]) for r in rows]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="episodes per controller")
    parser.add_argument("--controllers", default="fixed,actuated,random")
    parser.add_argument("--agent-stats", type=Path, help="episodes recorded by MTRL_SUMO_STATS")
    parser.add_argument("--json", type=Path, help="write the table as JSON here")
    args = parser.parse_args(argv)
    table: dict[str, Any] = {}
    for controller in args.controllers.split(","):
        # libsumo: one simulation per process, reloaded for each seed (the workers' way too)
        sim = GridSimulation("agent" if controller == "random" else controller)
        try:
            rows = [
                asdict(play(sim, s, np.random.default_rng(s) if controller == "random" else None))
                for s in range(args.seeds)
            ]
        finally:
            sim.close()
        table[controller] = summarise(rows)
    if args.agent_stats:
        table["agent"] = summarise(list(recorded_episodes(args.agent_stats)))
    print(f"{'controller':<10} {'return/intersection':>22} {'waiting s/vehicle':>20} "
          f"{'throughput veh/h':>18} {'teleports':>10}")  # fmt: skip
    for name, s in table.items():
        cells = [
            f"{s[k]['mean']:.1f} ± {s[k]['std']:.1f}"
            for k in ("return_per_intersection", "waiting_per_vehicle_s", "throughput_veh_per_h")
        ]
        print(f"{name:<10} {cells[0]:>22} {cells[1]:>20} {cells[2]:>18} "
              f"{s['teleports']['mean']:>10.1f}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"seeds": args.seeds, "controllers": table}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
