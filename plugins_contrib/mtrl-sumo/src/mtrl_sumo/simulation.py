"""One SUMO simulation of the grid, driven through libsumo (SUMO linked into this process).

:class:`GridSimulation` owns the signals' state machine and the measurements; the task's
semantics are in :mod:`mtrl_sumo.traffic`. libsumo runs SUMO inside the calling process, without
TraCI's TCP server (which SUMO opens on every interface) and without a socket round trip per
call, but it allows one simulation per process: :mod:`mtrl_sumo.worker` gives each simulation a
process of its own.
"""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mtrl_sumo import network

CONTROLLERS = ("agent", "fixed", "actuated")
VEHICLE_SPACE_M = 7.5  # a car's length plus its gap: a lane of L metres holds L / 7.5 cars
GREENS, LANES = 2, 8  # per intersection: green phases of the program, incoming lanes
OBS_SIZE = GREENS + 1 + 2 * LANES  # greens one-hot, min_green passed, (vehicles, halted) per lane


def import_libsumo() -> Any:
    """``import libsumo``, without its import-time warning that the installed pyarrow may be
    incompatible with the Arrow library libsumo bundles: that matters only where pyarrow is
    loaded into the same process, which a simulation's own worker process never does (every
    worker printed it, so a run repeated it at each start). Where pyarrow is loaded, the
    warning is printed as libsumo says it."""
    if "pyarrow" in sys.modules:
        import libsumo
    else:
        with contextlib.redirect_stdout(io.StringIO()):
            import libsumo
    return libsumo


@dataclass
class Episode:
    """What one simulated episode did, network-wide."""

    controller: str
    seed: int
    seconds: int = 0
    departed: int = 0  # vehicles that entered the network
    arrived: int = 0  # vehicles that reached their exit: the throughput
    halted_s: float = 0.0  # vehicle-seconds halted on the intersections' incoming lanes
    teleports: int = 0  # vehicles SUMO removed from a jam (stuck for 300 s)

    @property
    def waiting_per_vehicle_s(self) -> float:
        return self.halted_s / max(self.departed, 1)


@dataclass
class _Signal:
    """One intersection's program and where it stands."""

    greens: list[str]  # the program's green states, in program order
    yellows: list[str]  # the yellow state that follows each green
    lanes: list[str]  # incoming lanes, in SUMO's controlled-lane order
    capacity: np.ndarray  # vehicles each lane holds
    green: int = 0  # the green in effect (or the one a yellow leads to)
    green_since: float = 0.0  # simulated time the green started
    yellow_until: float = -1.0  # > now while the yellow before ``green`` shows


@dataclass(frozen=True)
class Settings:
    """The task's settings (the env's kwargs, README.md); invalid ones raise ``ValueError``."""

    controller: str = "agent"  # who drives the signals: the actions, or SUMO's programs
    num_seconds: int = 2 * network.PERIOD  # simulated seconds per episode
    delta_time: int = 5  # simulated seconds per step
    yellow_time: int = 3  # seconds of yellow before a new green
    min_green: int = 10  # seconds a green lasts at least

    def __post_init__(self) -> None:
        if self.controller not in CONTROLLERS:
            raise ValueError(f"controller must be one of {CONTROLLERS}, not {self.controller!r}")
        if not 0 < self.yellow_time <= self.delta_time:
            raise ValueError(
                f"need 0 < yellow_time <= delta_time, got {self.yellow_time}, {self.delta_time}"
            )
        if self.num_seconds < self.delta_time:
            raise ValueError(f"num_seconds ({self.num_seconds}) is shorter than one step")
        if self.min_green < 0:
            raise ValueError(f"min_green must be >= 0, got {self.min_green}")


def sumo_binary() -> str:
    from sumo import SUMO_HOME

    return str(Path(SUMO_HOME) / "bin" / "sumo")


class GridSimulation:
    """The 3 x 3 grid under one controller; ``step`` advances ``delta_time`` seconds."""

    def __init__(self, controller: str = "agent", **settings: Any) -> None:
        s = Settings(controller, **settings)
        self.sumo: Any = import_libsumo()
        self.controller = s.controller
        self.num_seconds, self.delta_time = s.num_seconds, s.delta_time
        self.yellow_time, self.min_green = s.yellow_time, s.min_green
        self.intersections = network.intersections()
        self._signals: dict[str, _Signal] = {}
        self._lanes: dict[str, dict[int, Any]] = {}
        self._started = False
        self.now = 0.0
        self.episode: Episode | None = None  # the episode running or just finished

    def _args(self, seed: int) -> list[str]:
        return [
            "-n", str(network.net_file(self.controller)), "-r", str(network.route_file()),
            "--seed", str(seed), "--no-step-log", "true", "--no-warnings", "true",
            "--duration-log.disable", "true", "--time-to-teleport", "300",
        ]  # fmt: skip

    def reset(self, seed: int) -> np.ndarray:
        """Reload the simulation with demand seed ``seed``; the first observations [9, 19]."""
        if self._started:
            self.sumo.load(self._args(seed))
        else:
            self.sumo.start([sumo_binary(), *self._args(seed)])
            self._started = True
            self._signals = {tls: self._read_signal(tls) for tls in self.intersections}
        self._subscribe()
        self.now = 0.0
        for sig in self._signals.values():
            sig.green, sig.green_since, sig.yellow_until = 0, 0.0, -1.0
        if self.controller == "agent":
            for tls, sig in self._signals.items():
                self.sumo.trafficlight.setRedYellowGreenState(tls, sig.greens[0])
        self.episode = Episode(self.controller, int(seed))
        self._lanes = self.sumo.lane.getAllSubscriptionResults()
        return self.observations()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """Request greens (ignored unless ``controller == "agent"``), run ``delta_time``
        seconds; (observations [9, 19], rewards [9], episode over)."""
        if self.controller == "agent":
            for tls, action in zip(self.intersections, actions, strict=True):
                self._request(tls, int(action))
        halted = np.zeros(len(self.intersections), np.float64)
        for _ in range(self.delta_time):
            self._advance_one_second()
            halted += self._halted_now()
        done = self.now >= self.num_seconds
        return self.observations(), (-halted / 60.0).astype(np.float32), done

    def close(self) -> None:
        if self._started:
            self._started = False
            self.sumo.close()

    # -- internals --------------------------------------------------------------------------

    def _subscribe(self) -> None:
        tc = self.sumo.constants
        for sig in self._signals.values():
            for lane in sig.lanes:
                self.sumo.lane.subscribe(
                    lane, [tc.LAST_STEP_VEHICLE_NUMBER, tc.LAST_STEP_VEHICLE_HALTING_NUMBER]
                )
        self.sumo.simulation.subscribe(
            [
                tc.VAR_DEPARTED_VEHICLES_NUMBER,
                tc.VAR_ARRIVED_VEHICLES_NUMBER,
                tc.VAR_TELEPORT_STARTING_VEHICLES_NUMBER,
            ]
        )

    def _read_signal(self, tls: str) -> _Signal:
        phases = self.sumo.trafficlight.getAllProgramLogics(tls)[0].phases
        greens, yellows = [], []
        for i, phase in enumerate(phases):
            if "y" not in phase.state and ("G" in phase.state or "g" in phase.state):
                greens.append(phase.state)
                yellows.append(phases[(i + 1) % len(phases)].state)
        lanes = list(dict.fromkeys(self.sumo.trafficlight.getControlledLanes(tls)))
        if len(greens) != GREENS or len(lanes) != LANES:
            raise RuntimeError(
                f"intersection {tls} has {len(greens)} greens and {len(lanes)} incoming lanes; "
                f"the task is built for {GREENS} and {LANES} (regenerate the net?)"
            )
        capacity = [self.sumo.lane.getLength(lane) / VEHICLE_SPACE_M for lane in lanes]
        return _Signal(greens, yellows, lanes, np.array(capacity, np.float32))

    def _request(self, tls: str, green: int) -> None:
        """Start the switch to ``green`` once the current green has lasted ``min_green``."""
        sig = self._signals[tls]
        if green == sig.green or self.now < sig.yellow_until:
            return
        if self.now - sig.green_since < self.min_green:
            return
        self.sumo.trafficlight.setRedYellowGreenState(tls, sig.yellows[sig.green])
        sig.green, sig.yellow_until = green, self.now + self.yellow_time

    def _advance_one_second(self) -> None:
        self.sumo.simulationStep()
        self.now += 1.0
        if self.controller == "agent":
            for tls, sig in self._signals.items():
                if sig.yellow_until >= 0 and self.now >= sig.yellow_until:
                    self.sumo.trafficlight.setRedYellowGreenState(tls, sig.greens[sig.green])
                    sig.green_since, sig.yellow_until = self.now, -1.0
        else:
            self._track_program()
        self._lanes = self.sumo.lane.getAllSubscriptionResults()
        self._count(self.sumo.simulation.getSubscriptionResults())

    def _track_program(self) -> None:
        """Under SUMO's own programs: which green is in effect (a yellow leads to the next)."""
        for tls, sig in self._signals.items():
            state = self.sumo.trafficlight.getRedYellowGreenState(tls)
            for k, (green, yellow) in enumerate(zip(sig.greens, sig.yellows, strict=True)):
                target = (k + 1) % GREENS if state == yellow else k
                if state in (green, yellow) and target != sig.green:
                    sig.green, sig.green_since = target, self.now

    def _count(self, sim: dict[int, Any]) -> None:
        tc, ep = self.sumo.constants, self.episode
        assert ep is not None
        ep.seconds = int(self.now)
        ep.departed += int(sim[tc.VAR_DEPARTED_VEHICLES_NUMBER])
        ep.arrived += int(sim[tc.VAR_ARRIVED_VEHICLES_NUMBER])
        ep.teleports += int(sim[tc.VAR_TELEPORT_STARTING_VEHICLES_NUMBER])

    def _halted_now(self) -> np.ndarray:
        key = self.sumo.constants.LAST_STEP_VEHICLE_HALTING_NUMBER
        out = np.array(
            [sum(self._lanes[lane][key] for lane in sig.lanes) for sig in self._signals.values()],
            np.float64,
        )
        assert self.episode is not None
        self.episode.halted_s += float(out.sum())
        return out

    def observations(self) -> np.ndarray:
        """[9, 19] in [0, 1]: the module docstring of :mod:`mtrl_sumo.traffic` says what."""
        tc = self.sumo.constants
        out = np.zeros((len(self.intersections), OBS_SIZE), np.float32)
        for row, sig in zip(out, self._signals.values(), strict=True):
            row[sig.green] = 1.0
            row[GREENS] = float(
                self.now - sig.green_since >= self.min_green and sig.yellow_until < 0
            )
            res = [self._lanes[lane] for lane in sig.lanes]
            vehicles = np.array([r[tc.LAST_STEP_VEHICLE_NUMBER] for r in res], np.float32)
            halted = np.array([r[tc.LAST_STEP_VEHICLE_HALTING_NUMBER] for r in res], np.float32)
            row[GREENS + 1 :: 2] = np.minimum(vehicles / sig.capacity, 1.0)
            row[GREENS + 2 :: 2] = np.minimum(halted / sig.capacity, 1.0)
        return out
