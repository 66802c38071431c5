"""A stochastic SIR epidemic under daily interventions, simulated exactly or by tau-leaping.

Model
-----
A closed population of ``N`` people is split into susceptible ``S``, infectious ``I`` and
removed ``R`` (``S + I + R = N`` always). Two kinds of events change the counts:

    infection   S, I, R -> S - 1, I + 1, R      at rate  beta_a * S * I / N
    recovery    S, I, R -> S, I - 1, R + 1      at rate  gamma * I

where ``beta_a = beta * contact_scale[a]`` depends on the intervention ``a`` chosen for the day
(0 none, 1 distancing, 2 lockdown by default). Without intervention the basic reproduction
number is ``R0 = beta / gamma``; the deterministic SIR limit's final size ``z`` (fraction ever
infected, starting from ``S(0) = N - I0``) solves ``1 - z = (S(0) / N) exp(-R0 z)``.

Simulation (``method``)
-----------------------
* ``"gillespie"``: Gillespie's direct method (exact). Waiting times are exponential with the
  total rate, the event kind is chosen in proportion to its rate; an event that would fall
  after the end of the day is discarded (exact by memorylessness, since the rates only change
  at day boundaries). The number of events, hence the CPU time of a step, is itself random.
  The event loop is vectorised across copies: each iteration fires one event in every copy
  that still has one before the end of the day.
* ``"tau_leap"``: a binomial chain with ``substeps`` sub-steps of length ``h`` per day:
  ``new infections ~ Bin(S, 1 - exp(-beta_a I h / N))``, ``recoveries ~ Bin(I, 1 - exp(-gamma
  h))``. Counts stay integer and non-negative and ``N`` is conserved; infection pressure is
  approximated as constant within a sub-step, so it is close to, not exactly, the SSA law
  (recovery alone is exact).

Each copy draws only from its own generator (``seed + i``), so its path does not depend on the
other copies or on ``num_envs``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from mtrl.plugins import BatchEnv, StepBatch
from mtrl_scisim.streams import CopyStreams

METHODS = ("gillespie", "tau_leap")


def sir_final_size(r0: float, s0: float = 1.0) -> float:
    """Deterministic SIR final size: the positive root ``z`` of ``1 - z = s0 exp(-r0 z)``.

    ``s0`` is the initial susceptible fraction (no one removed at the start). The function
    ``g(z) = s0 exp(-r0 z) - (1 - z)`` is convex with ``g(0+) < 0 < g(1)``, so bisection on
    ``(0, 1]`` finds the root; it is 0 when ``s0 = 1`` and ``r0 <= 1`` (no outbreak).
    """
    if s0 >= 1.0 and r0 <= 1.0:
        return 0.0

    def g(z: float) -> float:
        return s0 * np.exp(-r0 * z) - (1.0 - z)

    lo, hi = 1e-12, 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if g(mid) < 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def gillespie_day(
    s: np.ndarray,
    i: np.ndarray,
    r: np.ndarray,
    beta: np.ndarray,
    gamma: float,
    population: int,
    copies: np.ndarray,
    streams: CopyStreams,
) -> np.ndarray:
    """Advance ``copies`` by one day of exact SSA in place; return events fired per copy.

    ``s, i, r`` are int64 count arrays over all copies; ``beta`` the per-copy contact rate.
    """
    events = np.zeros(len(s), np.int64)
    t = np.zeros(len(s))
    active = copies[i[copies] > 0]
    while active.size:
        ii = i[active]
        a_inf = beta[active] * s[active] * ii / population
        a_total = a_inf + gamma * ii
        u = streams.uniforms(active, 2)
        t[active] -= np.log1p(-u[:, 0]) / a_total  # Exp(a_total) waiting time
        fire = t[active] < 1.0
        infect = fire & (u[:, 1] * a_total < a_inf)
        recover = fire & ~infect
        s[active] -= infect
        i[active] += infect.astype(np.int64) - recover
        r[active] += recover
        events[active] += fire
        active = active[fire & (i[active] > 0)]
    return events


def tau_leap_day(
    s: np.ndarray,
    i: np.ndarray,
    r: np.ndarray,
    beta: np.ndarray,
    gamma: float,
    population: int,
    copies: np.ndarray,
    streams: CopyStreams,
    substeps: int,
) -> np.ndarray:
    """Advance ``copies`` by one day of binomial tau-leaping in place; return events per copy."""
    h = 1.0 / substeps
    p_rec = -np.expm1(-gamma * h)
    events = np.zeros(len(s), np.int64)
    gens = streams.generators
    for _ in range(substeps):
        p_inf = -np.expm1(-beta[copies] * i[copies] * h / population)
        # numpy has no multi-stream binomial; one call per copy keeps copy i on seed + i
        new_inf = np.array(
            [gens[c].binomial(s[c], p) for c, p in zip(copies, p_inf, strict=True)], dtype=np.int64
        )
        new_rec = np.array([gens[c].binomial(i[c], p_rec) for c in copies], dtype=np.int64)
        s[copies] -= new_inf
        i[copies] += new_inf - new_rec
        r[copies] += new_rec
        events[copies] += new_inf + new_rec
    return events


class EpidemicBatchEnv(BatchEnv):
    """``num_envs`` independent SIR epidemics; the agent picks one intervention per day.

    Observation ``(S/N, I/N, R/N, day/horizon)`` float32 in ``[0, 1]``. Action ``Discrete(3)``:
    index into ``contact_scale`` (multiplier of ``beta``) and ``action_costs`` (cost per day).
    Reward ``-(infection_weight * new_infections / N + action_costs[a])``. ``terminated`` when
    ``I = 0`` (the epidemic is over: an absorbing state), else ``truncated`` after ``horizon``
    days. Every episode starts from ``S = N - I0, I = I0, R = 0``.
    """

    def __init__(
        self,
        num_envs: int,
        seed: int = 0,
        *,
        population: int = 1000,
        initial_infected: int = 10,
        beta: float = 0.3,
        gamma: float = 0.1,
        method: str = "gillespie",
        substeps: int = 4,
        horizon: int = 365,
        contact_scale: tuple[float, float, float] = (1.0, 0.6, 0.2),
        action_costs: tuple[float, float, float] = (0.0, 0.001, 0.005),
        infection_weight: float = 1.0,
        copy: bool = True,
    ) -> None:
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if not 0 < initial_infected <= population:
            raise ValueError(
                f"need 0 < initial_infected <= population, got {initial_infected}, {population}"
            )
        if beta < 0 or gamma <= 0 or substeps < 1 or horizon < 1 or num_envs < 1:
            raise ValueError(
                "need beta >= 0, gamma > 0 and substeps, horizon, num_envs >= 1; got "
                f"beta={beta}, gamma={gamma}, substeps={substeps}, horizon={horizon}, "
                f"num_envs={num_envs}"
            )
        if len(contact_scale) != 3 or len(action_costs) != 3:
            raise ValueError("contact_scale and action_costs need one value per action (3)")
        if min(contact_scale) < 0:
            raise ValueError(f"contact_scale must be non-negative, got {contact_scale}")
        self.num_envs = num_envs
        self.population = int(population)
        self.initial_infected = int(initial_infected)
        self.beta, self.gamma = float(beta), float(gamma)
        self.method, self.substeps, self.horizon = method, substeps, horizon
        self.contact_scale = np.asarray(contact_scale, dtype=float)
        self.action_costs = np.asarray(action_costs, dtype=float)
        self.infection_weight = infection_weight
        self.single_observation_space = gym.spaces.Box(0.0, 1.0, (4,), np.float32)
        self.single_action_space = gym.spaces.Discrete(3)
        self._streams = CopyStreams(seed + np.arange(num_envs))
        self._copy = copy
        self.s = np.zeros(num_envs, np.int64)
        self.i = np.zeros(num_envs, np.int64)
        self.r = np.zeros(num_envs, np.int64)
        self.day = np.zeros(num_envs, np.int64)
        #: events (infections + recoveries) simulated in each copy during the last step
        self.last_events = np.zeros(num_envs, np.int64)
        self._needs_reset = np.ones(num_envs, bool)
        self._obs = np.zeros((num_envs, 4), np.float32)
        self._reward = np.zeros(num_envs, np.float32)
        self._terminated = np.zeros(num_envs, bool)
        self._truncated = np.zeros(num_envs, bool)
        self._started = False

    @property
    def r0(self) -> float:
        """Basic reproduction number without intervention, ``beta / gamma``."""
        return self.beta / self.gamma

    def _reset_copies(self, copies: np.ndarray) -> None:
        self.s[copies] = self.population - self.initial_infected
        self.i[copies] = self.initial_infected
        self.r[copies] = 0
        self.day[copies] = 0

    def _write_obs(self) -> None:
        self._obs[:, 0] = self.s / self.population
        self._obs[:, 1] = self.i / self.population
        self._obs[:, 2] = self.r / self.population
        self._obs[:, 3] = self.day / self.horizon

    def _out(self, arr: np.ndarray) -> np.ndarray:
        return arr.copy() if self._copy else arr

    def reset(self) -> np.ndarray:
        """Start every copy at ``(N - I0, I0, 0)`` on day 0; return the observations."""
        self._reset_copies(np.arange(self.num_envs))
        self._needs_reset[:] = False
        self._started = True
        self._write_obs()
        return self._out(self._obs)

    def step(self, actions: Any) -> StepBatch:
        """Simulate one day under each copy's intervention; ended copies are reset instead."""
        if not self._started:
            raise RuntimeError("scisim/epidemic: call reset() before step()")
        a = np.asarray(actions)
        if a.shape != (self.num_envs,) or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(
                f"scisim/epidemic: actions must be integers of shape ({self.num_envs},), "
                f"got {a.dtype} {a.shape}"
            )
        if a.min() < 0 or a.max() > 2:
            raise ValueError(f"scisim/epidemic: actions must be 0, 1 or 2, got {a.tolist()}")
        resets = np.flatnonzero(self._needs_reset)
        live = np.flatnonzero(~self._needs_reset)
        s_before = self.s.copy()
        beta = self.beta * self.contact_scale[a]
        args = (self.s, self.i, self.r, beta, self.gamma, self.population, live, self._streams)
        if self.method == "gillespie":
            self.last_events[:] = gillespie_day(*args)
        else:
            self.last_events[:] = tau_leap_day(*args, self.substeps)
        self.day[live] += 1
        new_infections = s_before - self.s
        self._reward[:] = -(
            self.infection_weight * new_infections / self.population + self.action_costs[a]
        )
        self._terminated[:] = self.i == 0
        self._truncated[:] = (self.day >= self.horizon) & ~self._terminated
        if resets.size:
            self._reset_copies(resets)
            self._reward[resets] = 0.0
            self._terminated[resets] = False
            self._truncated[resets] = False
        self._needs_reset[:] = self._terminated | self._truncated
        self._write_obs()
        return StepBatch(
            obs=self._out(self._obs),
            reward=self._out(self._reward),
            terminated=self._out(self._terminated),
            truncated=self._out(self._truncated),
        )
