"""Steering an ensemble of SIR simulations: where does a major outbreak become likely?

The study
---------
A stochastic SIR epidemic (:mod:`mtrl_scisim.epidemic`, tau-leaping) in a population of ``N``
starts from ``I0`` infectious people with basic reproduction number ``R0``. It either dies
out early or becomes a *major outbreak* (more than ``major_fraction`` of the population ever
infected). The study wants the region of the ``(R0, I0)`` plane where a major outbreak is more
likely than not, from as few simulations as it can. Near ``R0 = 1`` the answer is a coin toss
per run, so a simulation there tells little on its own, and where to run the next ones
matters: that is what the agent chooses.

The parameters are given in the unit square: ``u1`` maps to ``R0`` on
``[r0_low, r0_low + r0_span]`` and ``u2`` to ``I0 = round(max_initial ** u2)`` (1 to
``max_initial``, on a log scale). Each study (episode) draws its own hidden ``r0_low``, so the
region moves from one study to the next and cannot be learned by heart.

The figure of merit, shared by the agent and every baseline, is the fraction of a
``GRID × GRID`` grid of the square that the study's estimate classifies wrongly: the estimate
is a Gaussian-kernel (Nadaraya-Watson) average of the outcomes so far (:func:`kernel_estimate`),
the truth the simulator's own ``P(major)``, tabulated over ``(R0, I0)`` by
:mod:`mtrl_scisim.steer_truth` (shipped as ``outbreak_table.npz``; linear in ``R0`` between
rows). The branching-process law ``1 - min(1, 1/R0) ** I0`` (:func:`outbreak_probability`) is
its large-population limit: the tests check that the table follows it away from ``R0 = 1``.

The env (``scisim/outbreak-boundary``)
--------------------------------------
One step runs ``members`` simulations at once. The action gives their parameters: with
``action: points``, ``members × 2`` values in ``[0, 1]``; with ``action: cells``, one cell
of the observation's grid per member (``MultiDiscrete``), the point drawn uniformly inside
it; with ``action: acquisition``, two values in ``[0, 1]`` that set how the members' cells are
chosen from the study's state — how much to favour cells with little data over uncertain ones
and how greedily (:mod:`mtrl_scisim.steer_acquisition`): the agent steers the strategy.
The observation is what the study knows on a coarse ``OBS_GRID × OBS_GRID`` grid — the
estimated probability and the amount of nearby data in each cell — and the share of the
budget left. The reward is the drop of the misclassified fraction the step brings, so an
episode's return is the first error minus the last. An episode ends when ``budget``
simulations have run. Copy ``i`` draws its studies and simulations only from
streams seeded by ``seed + i``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from mtrl.plugins import BatchEnv, StepBatch
from mtrl_scisim.epidemic import tau_leap_day
from mtrl_scisim.steer_acquisition import acquire, strategy
from mtrl_scisim.streams import CopyStreams

GRID = 24
OBS_GRID = 8
ACTIONS = ("points", "cells", "acquisition")
TABLE = Path(__file__).with_name("outbreak_table.npz")


def grid_points(n: int) -> np.ndarray:
    """Centres of an ``n × n`` grid of the unit square, shape ``(n * n, 2)``."""
    c = (np.arange(n) + 0.5) / n
    u1, u2 = np.meshgrid(c, c, indexing="ij")
    return np.stack([u1.ravel(), u2.ravel()], axis=1)


def outbreak_probability(r0: np.ndarray, i0: np.ndarray) -> np.ndarray:
    """Branching-process chance that ``i0`` infectious people start a major outbreak:
    ``1 - q ** i0`` with extinction probability ``q = min(1, 1 / r0)`` per line."""
    q = np.minimum(1.0, 1.0 / np.maximum(np.asarray(r0, float), 1e-12))
    return 1.0 - q ** np.asarray(i0, float)


def kernel_estimate(
    points: np.ndarray, outcomes: np.ndarray, at: np.ndarray, bandwidth: float = 0.08
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian-kernel estimate of the outcome's mean at ``at`` from ``points`` (``(n, 2)``)
    and their 0/1 ``outcomes``, shrunk toward 1/2 by one pseudo-observation of weight 0.1
    where data are sparse; returns (estimate, summed kernel weight) at each of ``at``."""
    if len(points) == 0:
        return np.full(len(at), 0.5), np.zeros(len(at))
    d2 = ((at[:, None, :] - points[None, :, :]) ** 2).sum(-1)
    w = np.exp(-0.5 * d2 / bandwidth**2)
    mass = w.sum(1)
    prior = 0.1
    return (w @ outcomes + 0.5 * prior) / (mass + prior), mass


def misclassified(estimate: np.ndarray, truth: np.ndarray) -> float:
    """Fraction of grid points where ``estimate`` and ``truth`` fall on different sides of 1/2."""
    return float(np.mean((estimate > 0.5) != (truth > 0.5)))


@dataclass(frozen=True)
class OutbreakStudy:
    """The simulations' constants and the parameter box (module docstring)."""

    population: int = 2000
    gamma: float = 0.2
    r0_span: float = 2.0
    r0_low_range: tuple[float, float] = (0.5, 1.1)
    max_initial: int = 30
    major_fraction: float = 0.1
    substeps: int = 4
    horizon: int = 400

    def simulation_constants(self) -> dict[str, float]:
        """What the law of an outcome depends on, besides ``(R0, I0)``."""
        return {
            "population": self.population,
            "gamma": self.gamma,
            "major_fraction": self.major_fraction,
            "substeps": self.substeps,
            "horizon": self.horizon,
        }

    def parameters(self, u: np.ndarray, r0_low: float | np.ndarray) -> tuple[np.ndarray, ...]:
        """``(R0, I0)`` of unit-square points ``u`` (``(..., 2)``) in a study whose range
        starts at ``r0_low`` (a scalar, or one per point)."""
        u = np.clip(np.asarray(u, float), 0.0, 1.0)
        r0 = np.asarray(r0_low, float) + self.r0_span * u[..., 0]
        i0 = np.rint(self.max_initial ** u[..., 1]).astype(np.int64)
        return r0, i0

    def truth(self, r0_low: float) -> np.ndarray:
        """``P(major)`` on the figure-of-merit grid for a study starting at ``r0_low``."""
        table = load_table(self)
        return table.probability(*self.parameters(grid_points(GRID), r0_low))

    def simulate(
        self, r0: np.ndarray, i0: np.ndarray, streams: CopyStreams | np.random.Generator
    ) -> np.ndarray:
        """Run one epidemic per entry until it dies out or ``horizon`` days pass; return the
        fraction ever infected beyond the initial cases. With :class:`CopyStreams`, member
        ``m`` draws from stream ``m`` only (the env's seeding contract); with one generator,
        all members draw from it in vectorised calls (same law, many times faster: the
        truth table's runs)."""
        n = len(r0)
        s = (self.population - i0).astype(np.int64)
        i = i0.astype(np.int64).copy()
        r = np.zeros(n, np.int64)
        beta = np.asarray(r0, float) * self.gamma
        live = np.flatnonzero(i > 0)
        for _ in range(self.horizon):
            if live.size == 0:
                break
            if isinstance(streams, np.random.Generator):
                _tau_leap_day_shared(s, i, r, beta, self, live, streams)
            else:
                tau_leap_day(
                    s, i, r, beta, self.gamma, self.population, live, streams, self.substeps
                )
            live = live[i[live] > 0]
        return (self.population - i0 - s) / self.population


def _tau_leap_day_shared(
    s: np.ndarray,
    i: np.ndarray,
    r: np.ndarray,
    beta: np.ndarray,
    study: OutbreakStudy,
    live: np.ndarray,
    rng: np.random.Generator,
) -> None:
    """:func:`mtrl_scisim.epidemic.tau_leap_day`'s binomial chain with one generator for all
    ``live`` members (vectorised draws; the tests hold its law to the per-copy one's)."""
    h = 1.0 / study.substeps
    p_rec = -np.expm1(-study.gamma * h)
    for _ in range(study.substeps):
        p_inf = -np.expm1(-beta[live] * i[live] * h / study.population)
        new_inf = rng.binomial(s[live], p_inf)
        new_rec = rng.binomial(i[live], p_rec)
        s[live] -= new_inf
        i[live] += new_inf - new_rec
        r[live] += new_rec


@dataclass(frozen=True)
class OutbreakTable:
    """``p[j, k]``: fraction of major outbreaks at ``R0 = r0[j]`` and ``I0 = k + 1``, from
    ``per_cell`` runs each (standard error at most ``0.5 / sqrt(per_cell)``)."""

    r0: np.ndarray
    p: np.ndarray
    per_cell: int

    def probability(self, r0: np.ndarray, i0: np.ndarray) -> np.ndarray:
        """``P(major)`` at each ``(r0, i0)``, linear in ``R0`` between rows."""
        r0 = np.asarray(r0, float)
        if r0.min() < self.r0[0] or r0.max() > self.r0[-1]:
            raise ValueError(
                f"R0 outside the table's [{self.r0[0]}, {self.r0[-1]}]: widen it with "
                "python -m mtrl_scisim.steer_truth"
            )
        k = np.asarray(i0, np.int64) - 1
        pos = (r0 - self.r0[0]) / (self.r0[1] - self.r0[0])
        j = np.minimum(np.floor(pos).astype(np.int64), len(self.r0) - 2)
        f = pos - j
        return (1 - f) * self.p[j, k] + f * self.p[j + 1, k]


@functools.cache
def _read(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def load_table(study: OutbreakStudy, path: Path = TABLE) -> OutbreakTable:
    """The table for ``study``'s simulation constants, or a ValueError saying how to make it."""
    data = _read(path)
    wanted = {**study.simulation_constants(), "max_initial": study.max_initial}
    differ = {k: v for k, v in wanted.items() if float(data[k]) != float(v)}
    if differ:
        raise ValueError(
            f"{path.name} holds the outbreak law for other constants than {differ}: make one "
            "with python -m mtrl_scisim.steer_truth and those constants"
        )
    return OutbreakTable(data["r0"], data["p"], int(data["per_cell"]))


class OutbreakBoundaryBatchEnv(BatchEnv):
    """``num_envs`` independent studies; each step runs ``members`` simulations per study."""

    def __init__(
        self,
        num_envs: int,
        seed: int = 0,
        *,
        members: int = 4,
        budget: int = 48,
        bandwidth: float = 0.08,
        action: str = "points",
        copy: bool = True,
        **study: Any,
    ) -> None:
        if num_envs < 1 or members < 1 or budget < members or budget % members:
            raise ValueError(
                "need num_envs, members >= 1 and budget a multiple of members; got "
                f"num_envs={num_envs}, members={members}, budget={budget}"
            )
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
        self.action = action
        self.num_envs, self.members, self.budget = num_envs, members, budget
        self.steps_per_study = budget // members
        self.bandwidth = bandwidth
        self.study = OutbreakStudy(**study)
        self.single_observation_space = gym.spaces.Box(
            0.0, 1.0, (2 * OBS_GRID * OBS_GRID + 1,), np.float32
        )
        if action == "points":
            self.single_action_space: gym.Space = gym.spaces.Box(
                0.0, 1.0, (members * 2,), np.float32
            )
        elif action == "cells":  # a cell of the grid per member, the point drawn inside it
            self.single_action_space = gym.spaces.MultiDiscrete([OBS_GRID * OBS_GRID] * members)
        else:  # the acquisition rule's coverage weight and temperature
            self.single_action_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        # Copy e's generators: its studies' draws, and one stream per member slot.
        seqs = [np.random.SeedSequence([seed + e, 0]) for e in range(num_envs)]
        self._study_rng = [np.random.default_rng(s) for s in seqs]
        slot_seeds = [
            int(np.random.SeedSequence([seed + e, 1 + k]).generate_state(1)[0])
            for e in range(num_envs)
            for k in range(members)
        ]
        self._streams = CopyStreams(slot_seeds)
        self._grid, self._obs_grid = grid_points(GRID), grid_points(OBS_GRID)
        self.r0_low = np.zeros(num_envs)
        self._truth = np.zeros((num_envs, GRID * GRID))
        self.points = [np.zeros((0, 2)) for _ in range(num_envs)]
        self.outcomes = [np.zeros(0) for _ in range(num_envs)]
        self.error = np.zeros(num_envs)  # misclassified fraction now
        #: each copy's last step: final sizes of its members, and its error after them
        #: (kept when the study then starts anew)
        self.last_final = np.zeros((num_envs, members))
        self.last_error = np.zeros(num_envs)
        self._step = np.zeros(num_envs, np.int64)
        self._needs_reset = np.ones(num_envs, bool)
        self._obs = np.zeros((num_envs, self.single_observation_space.shape[0]), np.float32)
        self._copy = copy
        self._started = False

    def _new_study(self, e: int) -> None:
        lo, hi = self.study.r0_low_range
        self.r0_low[e] = self._study_rng[e].uniform(lo, hi)
        self._truth[e] = self.study.truth(self.r0_low[e])
        self.points[e], self.outcomes[e] = np.zeros((0, 2)), np.zeros(0)
        self._step[e] = 0
        self.error[e] = self._error(e)
        self._write_obs(e)

    def _error(self, e: int) -> float:
        est, _ = kernel_estimate(self.points[e], self.outcomes[e], self._grid, self.bandwidth)
        return misclassified(est, self._truth[e])

    def _write_obs(self, e: int) -> None:
        est, mass = kernel_estimate(
            self.points[e], self.outcomes[e], self._obs_grid, self.bandwidth
        )
        k = OBS_GRID * OBS_GRID
        self._obs[e, :k] = est
        self._obs[e, k : 2 * k] = mass / (mass + 1.0)
        self._obs[e, -1] = 1.0 - self._step[e] / self.steps_per_study

    def _points(self, a: np.ndarray) -> np.ndarray:
        """The unit-square points ``(num_envs, members, 2)`` an action batch asks for (cells,
        given or acquired: a point drawn uniformly inside each, from the copy's own stream)."""
        widths = {"points": self.members * 2, "cells": self.members, "acquisition": 2}
        width = widths[self.action]
        if a.shape != (self.num_envs, width):
            raise ValueError(
                f"scisim/outbreak-boundary: actions must have shape ({self.num_envs}, {width}), "
                f"got {a.shape}"
            )
        if self.action == "points":
            return np.clip(a.astype(float).reshape(self.num_envs, self.members, 2), 0.0, 1.0)
        cells = a.astype(np.int64) if self.action == "cells" else self._acquire(a)
        if cells.min() < 0 or cells.max() >= OBS_GRID * OBS_GRID:
            raise ValueError(f"scisim/outbreak-boundary: cells must be in [0, {OBS_GRID**2})")
        corner = np.stack([cells // OBS_GRID, cells % OBS_GRID], axis=-1) / OBS_GRID
        jitter = np.stack([g.random((self.members, 2)) for g in self._study_rng])
        return corner + jitter / OBS_GRID

    def _acquire(self, a: np.ndarray) -> np.ndarray:
        """Each copy's ``members`` cells by the acquisition rule its action sets."""
        k = OBS_GRID * OBS_GRID
        cells = np.zeros((self.num_envs, self.members), np.int64)
        for e in range(self.num_envs):
            weight, temperature = strategy(a[e])
            est, density = self._obs[e, :k], self._obs[e, k : 2 * k]
            cells[e] = acquire(est, density, weight, temperature, self.members, self._study_rng[e])
        return cells

    def reset(self) -> np.ndarray:
        for e in range(self.num_envs):
            self._new_study(e)
        self._needs_reset[:] = False
        self._started = True
        return self._obs.copy() if self._copy else self._obs

    def step(self, actions: Any) -> StepBatch:
        """Run each live study's next ``members`` simulations; ended studies start anew."""
        if not self._started:
            raise RuntimeError("scisim/outbreak-boundary: call reset() before step()")
        u = self._points(np.asarray(actions))
        reward = np.zeros(self.num_envs, np.float32)
        terminated = np.zeros(self.num_envs, bool)
        live = np.flatnonzero(~self._needs_reset)
        if live.size:
            r0, i0 = self.study.parameters(u[live], self.r0_low[live, None])
            slots = (live[:, None] * self.members + np.arange(self.members)).ravel()
            sub = _Slots(self._streams, slots)
            final = self.study.simulate(r0.ravel(), i0.ravel(), sub)
            final = final.reshape(len(live), self.members)
            self.last_final[live] = final
            major = final > self.study.major_fraction
            for j, e in enumerate(live):
                self.points[e] = np.concatenate([self.points[e], u[e]])
                self.outcomes[e] = np.concatenate([self.outcomes[e], major[j].astype(float)])
                self._step[e] += 1
                before, self.error[e] = self.error[e], self._error(e)
                reward[e] = before - self.error[e]
                self.last_error[e] = self.error[e]
                terminated[e] = self._step[e] >= self.steps_per_study
                self._write_obs(e)
        for e in np.flatnonzero(self._needs_reset):
            self._new_study(e)
        self._needs_reset[:] = terminated
        obs = self._obs.copy() if self._copy else self._obs
        return StepBatch(
            obs=obs,
            reward=reward,
            terminated=terminated,
            truncated=np.zeros(self.num_envs, bool),
        )


class _Slots:
    """The member slots ``slots`` of ``streams``, seen as streams ``0 .. len(slots) - 1``:
    the simulation of a subset of studies draws from those studies' own streams."""

    def __init__(self, streams: CopyStreams, slots: np.ndarray) -> None:
        self._streams, self._slots = streams, np.asarray(slots)
        self.generators = [streams.generators[s] for s in self._slots]

    def __len__(self) -> int:
        return len(self._slots)

    def uniforms(self, copies: np.ndarray, k: int) -> np.ndarray:
        return self._streams.uniforms(self._slots[copies], k)
