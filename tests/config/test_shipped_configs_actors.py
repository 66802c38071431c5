"""Shipped configs that step simulation codes use actors that survive the code's crash.

Users copy the shipped configs. Serial actors have no fault tolerance: one crash of a
simulation ends the run (with a checkpoint and the resume command, but it ends), while process,
thread and Ray actors count the fault and restart the actor. A config whose tasks run a
scientific simulation (an external code, or a contrib simulation plugin whose steps are costly)
therefore uses one of those.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mtrl.config import load_config

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))

#: Plugins whose envs are simulation codes: launched in processes of their own (heat: C + MPI,
#: lammps, sumo) or costly per step (scisim's solvers and ensembles of simulations).
SIMULATION_PLUGINS = {"heat", "lammps", "scisim", "sumo"}


def _simulations(path: Path) -> list[str]:
    return [t.env for t in load_config(path).tasks if t.env.split("/")[0] in SIMULATION_PLUGINS]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_a_shipped_config_of_simulations_restarts_a_crashed_one(path: Path) -> None:
    sims = _simulations(path)
    if not sims:
        return
    mode = load_config(path).actors.mode
    assert mode != "serial", (
        f"{path.name} steps {sims} with serial actors, which end the run on the first crash "
        "of a simulation: use actors.mode: process (faults counted, the actor restarted)"
    )


def test_the_simulation_configs_are_found() -> None:
    """The rule above is not vacuous: the SAC and steering configs of scisim are among them."""
    names = {p.name for p in CONFIGS if _simulations(p)}
    assert {"sac_heat1d.yaml", "steer_outbreak.yaml", "science.yaml", "heat.yaml"} <= names
