"""The outbreak study's truth: the simulator's own chance of a major outbreak, tabulated.

``python -m mtrl_scisim.steer_truth [--per-cell N] [--seed S]`` runs ``N`` epidemics
(:meth:`mtrl_scisim.steer.OutbreakStudy.simulate`, its vectorised one-generator form) in every
cell of an ``(R0, I0)`` table —
``R0`` from ``R0_MIN`` to ``R0_MAX`` in steps of ``R0_STEP``, ``I0`` from 1 to
``max_initial`` — and writes the fraction that became major outbreaks, with the simulation
constants it holds for, to ``outbreak_table.npz`` beside this module. A study with other
constants is refused until its table is made (the command takes them as options).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from mtrl_scisim.steer import TABLE, OutbreakStudy, OutbreakTable

R0_MIN, R0_MAX, R0_STEP = 0.3, 3.5, 0.05


def tabulate(study: OutbreakStudy, per_cell: int, seed: int = 0) -> OutbreakTable:
    """Run ``per_cell`` epidemics in every cell (one generator per ``R0`` row, seeded from
    ``seed`` and the row)."""
    r0 = np.round(np.arange(R0_MIN, R0_MAX + R0_STEP / 2, R0_STEP), 6)
    p = np.zeros((len(r0), study.max_initial))
    for j, value in enumerate(r0):
        i0 = np.repeat(np.arange(1, study.max_initial + 1), per_cell)
        rng = np.random.default_rng([seed, j])
        final = study.simulate(np.full(len(i0), value), i0, rng)
        p[j] = (final > study.major_fraction).reshape(study.max_initial, per_cell).mean(1)
    return OutbreakTable(r0, p, per_cell)


def save_table(table: OutbreakTable, study: OutbreakStudy, path: Path = TABLE) -> None:
    np.savez_compressed(
        path,
        r0=table.r0,
        p=table.p,
        per_cell=table.per_cell,
        max_initial=study.max_initial,
        **study.simulation_constants(),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-cell", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--population", type=int, default=OutbreakStudy.population)
    parser.add_argument("--major-fraction", type=float, default=OutbreakStudy.major_fraction)
    parser.add_argument("--out", type=Path, default=TABLE)
    args = parser.parse_args(argv)
    study = OutbreakStudy(population=args.population, major_fraction=args.major_fraction)
    start = time.perf_counter()
    table = tabulate(study, args.per_cell, args.seed)
    save_table(table, study, args.out)
    print(
        f"{args.out}: {table.p.shape} cells × {args.per_cell} runs in "
        f"{time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
