"""The barostat task: drive a LAMMPS fluid to a target pressure by compressing or expanding it.

Each episode draws (copy ``i`` from the stream ``seed + i``) a starting density
``ρ0 ~ U[0.3, 0.85]`` and a target pressure ``P* ~ logU[0.3, 4]`` (LJ units; at T = 1.5 these
span the fluid from gas-like to dense liquid). Every step the action ``a ∈ [-1, 1]`` strains the
box by ``a · max_strain`` per side (density changes by ``exp(-3 a max_strain)``; positive
expands), then one control interval of MD runs (:mod:`mtrl_lammps.fluid`).

- **Observation** (6 floats): the interval's relative pressure error ``P/P* - 1`` (clipped to
  ±5), ``ln P*``, the density, the previous action, ``t / horizon``, ``ln max(P, 0.01)``.
- **Reward**: ``-min(|P - P*| / P*, 2)``, the relative pressure error of the interval.
- **Episode**: ``horizon`` steps (a time limit: truncated). The density is kept within
  ``[0.1, 1.2]`` (a strain past either bound is cut), so no action can crush the fluid into a
  solid or boil it away.

:class:`BarostatTask` serves ``num_envs`` copies, one LAMMPS instance each, over one MPI
communicator: it implements mtrl's coupling ``Simulation`` (``hello``/``reset``/``step``) and is
what :mod:`mtrl_lammps.sim` serves. The textbook controller to compare with is in
:mod:`mtrl_lammps.baseline`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mtrl_lammps.fluid import FluidSettings, LJFluid

OBS_SIZE = 6
DENSITY_RANGE = (0.1, 1.2)
START_DENSITY = (0.3, 0.85)
TARGET_PRESSURE = (0.3, 4.0)


@dataclass(frozen=True)
class TaskSettings:
    horizon: int = 100  # control steps per episode
    max_strain: float = 0.01  # box strain per side per step at |a| = 1

    def __post_init__(self) -> None:
        if self.horizon < 1 or not 0 < self.max_strain <= 0.05:
            raise ValueError(
                f"need horizon >= 1 and 0 < max_strain <= 0.05, got {self.horizon}, "
                f"{self.max_strain}"
            )


def relative_error(pressure: float, target: float) -> float:
    return (pressure - target) / target


def reward(pressure: float, target: float) -> float:
    """Minus the relative pressure error, capped at 2."""
    return -min(abs(relative_error(pressure, target)), 2.0)


def observation(
    pressure: float, target: float, density: float, last_action: float, t: int, horizon: int
) -> np.ndarray:
    return np.array(
        [
            float(np.clip(relative_error(pressure, target), -5.0, 5.0)),
            math.log(target),
            density,
            last_action,
            t / horizon,
            math.log(max(pressure, 0.01)),
        ],
        np.float32,
    )


def bounded_strain(action: float, max_strain: float, density: float) -> float:
    """The strain of ``action``, cut so the density stays within :data:`DENSITY_RANGE`
    (density scales as ``exp(-3 strain)``)."""
    strain = float(np.clip(action, -1.0, 1.0)) * max_strain
    lo, hi = DENSITY_RANGE
    return float(np.clip(strain, math.log(density / hi) / 3, math.log(density / lo) / 3))


class _Copy:
    """One copy's episode state."""

    def __init__(self, fluid: LJFluid, seed: int) -> None:
        self.fluid = fluid
        self.rng = np.random.default_rng(seed)
        self.target = 1.0
        self.t = 0
        self.last_action = 0.0

    def reset(self, horizon: int) -> np.ndarray:
        density = float(self.rng.uniform(*START_DENSITY))
        lo, hi = np.log(TARGET_PRESSURE)
        self.target = float(np.exp(self.rng.uniform(lo, hi)))
        # LAMMPS seeds: positive, at most 900 million (its Marsaglia generator)
        vseed, bseed = (int(x) for x in self.rng.integers(1, 900_000_000, size=2))
        pressure = self.fluid.reset(density, vseed, bseed)
        self.t, self.last_action = 0, 0.0
        return observation(pressure, self.target, self.fluid.density(), 0.0, 0, horizon)


class BarostatTask:
    """``num_envs`` fluid copies under the barostat task (the coupling's ``Simulation``)."""

    def __init__(
        self,
        fluid: FluidSettings | None = None,
        task: TaskSettings | None = None,
        comm: Any = None,
    ) -> None:
        self.fluid_settings = fluid or FluidSettings()
        self.settings = task or TaskSettings()
        self.comm = comm
        self.copies: list[_Copy] = []

    def hello(self, num_envs: int, seed: int) -> bytes:
        from mtrl.coupling import protocol

        self.close()
        self.copies = [
            _Copy(LJFluid(self.fluid_settings, self.comm), seed + i) for i in range(num_envs)
        ]
        return protocol.spec_json(
            {"dtype": "float32", "shape": [OBS_SIZE]},
            {"type": "box", "dtype": "float32", "shape": [1], "low": -1.0, "high": 1.0},
            max_episode_steps=self.settings.horizon,
            name="lammps-barostat",
        )

    def reset(self) -> np.ndarray:
        return np.stack([c.reset(self.settings.horizon) for c in self.copies])

    def step(
        self, actions: np.ndarray, reset_mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        s, n = self.settings, len(self.copies)
        obs = np.zeros((n, OBS_SIZE), np.float32)
        rewards = np.zeros(n, np.float32)
        for i, c in enumerate(self.copies):
            if reset_mask[i]:
                obs[i] = c.reset(s.horizon)
                continue
            a = float(np.clip(np.asarray(actions[i]).reshape(-1)[0], -1.0, 1.0))
            pressure = c.fluid.advance(bounded_strain(a, s.max_strain, c.fluid.density()))
            c.t, c.last_action = c.t + 1, a
            obs[i] = observation(pressure, c.target, c.fluid.density(), a, c.t, s.horizon)
            rewards[i] = reward(pressure, c.target)
        done = np.zeros(n, np.uint8)  # mtrl truncates at the spec's max_episode_steps
        return obs, rewards, done, done

    def close(self) -> None:
        for c in self.copies:
            c.fluid.close()
        self.copies = []
