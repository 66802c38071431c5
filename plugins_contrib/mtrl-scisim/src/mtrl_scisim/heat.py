"""Heater control of the 1-D heat equation: the discretised PDE and its batch env.

Physics
-------
The temperature ``u(x, t)`` on the rod ``x in [0, 1]`` obeys

    u_t = alpha u_xx + f(x, t),    u(0, t) = u(1, t) = 0   (Dirichlet),
    f(x, t) = gain * sum_k a_k(t) b_k(x),   b_k(x) = exp(-(x - c_k)^2 / (2 w^2)),

with ``K`` Gaussian heaters of width ``w`` centred at ``c_k = (k + 1/2) / K`` whose intensities
``a_k in [-1, 1]`` (negative = cooling) are the agent's actions, held constant over one control
interval ``dt`` (zero-order hold).

Discretisation
--------------
Method of lines on ``n`` interior points ``x_j = j h``, ``h = 1 / (n + 1)``, with the
second-order Laplacian ``(L u)_j = (u_{j-1} - 2 u_j + u_{j+1}) / h^2`` (boundary values 0). Each
control interval is split into ``substeps`` steps of ``tau = dt / substeps`` of the theta-scheme

    (I - theta tau alpha L) u^{m+1} = (I + (1 - theta) tau alpha L) u^m + tau f,

``theta = 1/2`` (Crank-Nicolson, second order in time, A-stable) or ``theta = 1`` (backward
Euler, first order, L-stable: prefer it when ``alpha tau / h^2`` is huge and the data rough).
Both are unconditionally stable; with ``f = 0`` every discrete sine mode is multiplied by
``|g| < 1`` per step, so the discrete L2 norm decays monotonically. The tridiagonal system is
solved by Thomas' algorithm batched across copies (:mod:`mtrl_scisim.tridiagonal`), so one step
costs ``O(substeps * n * num_envs)`` and grows linearly with the grid size ``n``.

The first sine mode ``sin(pi x)`` decays as ``exp(-alpha pi^2 t)`` in the PDE; the scheme
reproduces it to ``O(h^2) + O(tau^2)`` (CN) or ``O(tau)`` (backward Euler).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from mtrl.plugins import BatchEnv, StepBatch
from mtrl_scisim.streams import CopyStreams
from mtrl_scisim.tridiagonal import ConstantTridiagonal

#: scheme name -> theta of the theta-method
SCHEMES: dict[str, float] = {"crank_nicolson": 0.5, "backward_euler": 1.0}


class HeatEquation1D:
    """The discretised heat equation on ``n`` interior points, advancing many fields at once.

    Fields are stored grid-major as ``(n + 2, m)`` arrays (``m`` copies) whose first and last
    rows are the Dirichlet boundary values and stay 0; each grid row is then contiguous across
    copies, which is what the batched Thomas sweep reads.
    """

    def __init__(
        self,
        n: int,
        alpha: float,
        dt: float,
        substeps: int = 1,
        scheme: str = "crank_nicolson",
    ) -> None:
        if n < 3:
            raise ValueError(f"grid size n must be >= 3, got {n}")
        if alpha <= 0 or dt <= 0:
            raise ValueError(f"alpha and dt must be positive, got alpha={alpha}, dt={dt}")
        if substeps < 1:
            raise ValueError(f"substeps must be >= 1, got {substeps}")
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {sorted(SCHEMES)}, got {scheme!r}")
        self.n, self.alpha, self.dt, self.substeps = n, alpha, dt, substeps
        self.theta = SCHEMES[scheme]
        self.h = 1.0 / (n + 1)
        self.x = self.h * np.arange(1, n + 1)
        self.tau = dt / substeps
        self._r = alpha * self.tau / self.h**2
        off = -self.theta * self._r
        self._implicit = ConstantTridiagonal(n, off, 1.0 - 2.0 * off, off)
        k = alpha / self.h**2
        self._poisson = ConstantTridiagonal(n, -k, 2.0 * k, -k)  # -alpha L

    def zeros(self, m: int) -> np.ndarray:
        """A ``(n + 2, m)`` field of zeros, boundary rows included."""
        return np.zeros((self.n + 2, m))

    def advance(self, u: np.ndarray, source: np.ndarray) -> None:
        """Advance fields ``u`` ``(n + 2, m)`` in place by ``dt``, with source ``(n, m)`` held."""
        inner = u[1:-1]
        explicit = (1.0 - self.theta) * self._r
        for _ in range(self.substeps):
            rhs = inner + self.tau * source
            if explicit:
                rhs += explicit * (u[:-2] - 2.0 * inner + u[2:])
            inner[...] = self._implicit.solve(rhs)

    def steady_state(self, source: np.ndarray) -> np.ndarray:
        """Interior ``(n, m)`` of the steady state: ``-alpha u_xx = source``, zero at the ends."""
        return self._poisson.solve(np.array(source, dtype=float, copy=True))

    def integral(self, u: np.ndarray) -> np.ndarray:
        """``int_0^1 u dx`` per copy (trapezoid rule; the boundary values are 0)."""
        return self.h * u[1:-1].sum(axis=0)

    def l2_norm(self, u: np.ndarray) -> np.ndarray:
        """``sqrt(int_0^1 u^2 dx)`` per copy (discrete L2 norm)."""
        return np.sqrt(self.h * (u[1:-1] ** 2).sum(axis=0))


def heater_profiles(x: np.ndarray, n_heaters: int, width: float) -> np.ndarray:
    """``(len(x), K)`` Gaussian profiles ``b_k(x)`` centred at ``(k + 1/2) / K``, peak 1."""
    centres = (np.arange(n_heaters) + 0.5) / n_heaters
    return np.exp(-((x[:, None] - centres[None, :]) ** 2) / (2.0 * width**2))


class Sensors:
    """Linear interpolation of ``(n + 2, m)`` fields at ``M`` evenly spaced interior points."""

    def __init__(self, n: int, n_sensors: int) -> None:
        self.positions = np.arange(1, n_sensors + 1) / (n_sensors + 1)
        p = self.positions * (n + 1)  # fractional index into the padded grid
        self._j = np.minimum(np.floor(p).astype(np.int64), n)
        self._w = (p - self._j)[:, None]

    def read(self, u: np.ndarray) -> np.ndarray:
        """Sensor readings ``(m, M)`` of fields ``u`` ``(n + 2, m)``."""
        return ((1.0 - self._w) * u[self._j] + self._w * u[self._j + 1]).T


class Heat1DBatchEnv(BatchEnv):
    """Drive a heated rod toward a random target profile; ``num_envs`` rods solved together.

    Each episode draws, from the copy's own generator, two heater settings ``a*, a0`` uniform
    in ``[-1, 1]^K``: the target is the steady state that ``a*`` would produce (so every target
    is reachable by admissible controls) and the initial field the steady state of ``a0``.

    Observation ``(2 M + 1,)`` float32: ``u`` at ``M`` sensors, the target at the same sensors,
    and the elapsed fraction of the horizon. Action ``Box(-1, 1, (K,))``, clipped to the box.
    Reward ``-mean_j (u_j - target_j)^2 - action_cost * sum_k a_k^2`` after the step. Episodes
    never terminate; they are truncated after ``horizon`` steps.
    """

    def __init__(
        self,
        num_envs: int,
        seed: int = 0,
        *,
        n: int = 64,
        alpha: float = 0.1,
        dt: float = 0.05,
        substeps: int = 1,
        scheme: str = "crank_nicolson",
        n_heaters: int = 4,
        heater_width: float = 0.05,
        gain: float = 3.0,
        n_sensors: int = 16,
        horizon: int = 200,
        action_cost: float = 0.01,
        copy: bool = True,
    ) -> None:
        if num_envs < 1 or n_heaters < 1 or n_sensors < 1 or horizon < 1:
            raise ValueError(
                "num_envs, n_heaters, n_sensors and horizon must be >= 1, got "
                f"{num_envs}, {n_heaters}, {n_sensors}, {horizon}"
            )
        if heater_width <= 0:
            raise ValueError(f"heater_width must be positive, got {heater_width}")
        self.num_envs = num_envs
        self.horizon = horizon
        self.action_cost = action_cost
        self.pde = HeatEquation1D(n, alpha, dt, substeps, scheme)
        self.profiles = gain * heater_profiles(self.pde.x, n_heaters, heater_width)  # (n, K)
        self.sensors = Sensors(n, n_sensors)
        m = n_sensors
        low = np.r_[np.full(2 * m, -np.inf), 0.0].astype(np.float32)
        high = np.r_[np.full(2 * m, np.inf), 1.0].astype(np.float32)
        self.single_observation_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (n_heaters,), np.float32)
        self._streams = CopyStreams(seed + np.arange(num_envs))
        self._copy = copy
        self.field = self.pde.zeros(num_envs)  # (n + 2, N): the current temperature
        self.target = np.zeros((n, num_envs))
        #: the heater setting whose steady state is each copy's target, ``(N, K)``
        self.target_controls = np.zeros((num_envs, n_heaters))
        self._target_obs = np.zeros((num_envs, m))
        self._elapsed = np.zeros(num_envs, np.int64)
        self._needs_reset = np.ones(num_envs, bool)
        self._obs = np.zeros((num_envs, 2 * m + 1), np.float32)
        self._reward = np.zeros(num_envs, np.float32)
        self._terminated = np.zeros(num_envs, bool)
        self._truncated = np.zeros(num_envs, bool)
        self._started = False

    def _reset_copies(self, copies: np.ndarray) -> None:
        k = self.single_action_space.shape[0]
        draws = np.stack([self._streams.generators[c].uniform(-1, 1, (2, k)) for c in copies])
        self.target_controls[copies] = draws[:, 0]
        self.target[:, copies] = self.pde.steady_state(self.profiles @ draws[:, 0].T)
        self.field[1:-1, copies] = self.pde.steady_state(self.profiles @ draws[:, 1].T)
        padded = np.zeros((self.pde.n + 2, len(copies)))
        padded[1:-1] = self.target[:, copies]
        self._target_obs[copies] = self.sensors.read(padded)
        self._elapsed[copies] = 0

    def _write_obs(self) -> None:
        m = self._target_obs.shape[1]
        self._obs[:, :m] = self.sensors.read(self.field)
        self._obs[:, m : 2 * m] = self._target_obs
        self._obs[:, 2 * m] = self._elapsed / self.horizon

    def _out(self, arr: np.ndarray) -> np.ndarray:
        return arr.copy() if self._copy else arr

    def reset(self) -> np.ndarray:
        """New episode (new target and initial field) in every copy; first observations."""
        self._reset_copies(np.arange(self.num_envs))
        self._needs_reset[:] = False
        self._started = True
        self._write_obs()
        return self._out(self._obs)

    def step(self, actions: Any) -> StepBatch:
        """Hold heater intensities for ``dt``; copies that ended last step are reset instead."""
        if not self._started:
            raise RuntimeError("scisim/heat1d: call reset() before step()")
        a = np.asarray(actions, dtype=np.float64)
        shape = (self.num_envs, *self.single_action_space.shape)
        if a.shape != shape:
            raise ValueError(f"scisim/heat1d: actions must have shape {shape}, got {a.shape}")
        if not np.isfinite(a).all():
            raise ValueError(f"scisim/heat1d: non-finite heater intensities {a.tolist()}")
        a = np.clip(a, -1.0, 1.0)
        self.pde.advance(self.field, self.profiles @ a.T)
        self._elapsed += 1
        err = np.mean((self.field[1:-1] - self.target) ** 2, axis=0)
        self._reward[:] = -err - self.action_cost * np.sum(a * a, axis=1)
        self._truncated[:] = self._elapsed >= self.horizon
        resets = np.flatnonzero(self._needs_reset)
        if resets.size:
            self._reset_copies(resets)
            self._reward[resets] = 0.0
            self._truncated[resets] = False
        self._needs_reset[:] = self._truncated
        self._write_obs()
        return StepBatch(
            obs=self._out(self._obs),
            reward=self._out(self._reward),
            terminated=self._out(self._terminated),
            truncated=self._out(self._truncated),
        )
