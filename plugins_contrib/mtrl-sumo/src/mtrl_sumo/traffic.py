"""Traffic-signal control on the shipped 3 x 3 grid: a pettingzoo parallel env over SUMO.

One agent per signalised intersection (``A0`` ... ``C2``). Every ``delta_time`` simulated
seconds each agent picks which green its intersection shows next (one action per green phase
of the net's program: north-south or east-west). A change is not instant: the current green
must have lasted ``min_green`` seconds, then the program's yellow shows for ``yellow_time``
seconds before the new green.

- **Observation** (19 floats in [0, 1]): one-hot of the green in effect (or the one a yellow
  leads to), whether a switch would be accepted now (``min_green`` passed, no yellow), then for
  each of the 8 incoming lanes its vehicles and its halted vehicles (speed < 0.1 m/s), each
  divided by the lane's capacity (length / 7.5 m).
- **Reward**: minus the vehicle-minutes spent halted on the intersection's incoming lanes
  during the step (halted vehicles summed over each simulated second, / 60). Summed over the
  agents and an episode it is minus the network's total waiting time at the signals, the
  quantity traffic engineers minimise, so returns compare directly with SUMO's own programs.
- **Episode**: ``num_seconds`` simulated seconds of the demand (:mod:`mtrl_sumo.network`), then
  every agent is truncated. Each reset reloads the simulation with a new ``--seed`` (arrivals
  are Bernoulli draws by SUMO).

``controller`` picks who drives the signals: ``agent`` (the actions), or SUMO's ``fixed``-time
or ``actuated`` programs (actions are ignored; observations and rewards are the same): the
baselines, run through the very same code.

Each env runs its simulation in a worker process of its own (:mod:`mtrl_sumo.worker`, SUMO
linked in through libsumo) over a socket pair. A worker that exits (SUMO crashed, killed)
raises ``RuntimeError`` naming its exit code at the next call: mtrl counts an env fault and
restarts the actor. A worker that hangs is caught by mtrl's step timeout. With
``MTRL_SUMO_STATS=FILE`` every finished episode appends its :class:`Episode` to ``FILE`` as a
JSON line (``mtrl eval`` then records the agent's throughput and waiting times).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from mtrl_sumo import network
from mtrl_sumo.simulation import GREENS, OBS_SIZE, Episode, Settings

STATS_ENV = "MTRL_SUMO_STATS"
ENV_ID = "sumo/grid3x3-v0"


class _Worker:
    """The child process that runs one simulation (:mod:`mtrl_sumo.worker`)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        ours, theirs = socket.socketpair()
        with theirs:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mtrl_sumo.worker", str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        self.conn = Connection(ours.detach())
        self.call("init", settings)

    def call(self, command: str, arg: Any = None) -> Any:
        try:
            self.conn.send((command, arg))
            status, value = self.conn.recv()
        except (EOFError, OSError) as e:
            try:
                how = f"exited with code {self.proc.wait(timeout=5)}"
            except subprocess.TimeoutExpired:
                how = "closed its socket but did not exit"
            raise RuntimeError(
                f"{ENV_ID}: the SUMO worker (pid {self.proc.pid}) {how} during {command!r} "
                f"({type(e).__name__})"
            ) from e
        if status == "error":
            raise RuntimeError(f"{ENV_ID}: SUMO failed during {command!r}: {value}")
        return value

    def close(self) -> None:
        with contextlib.suppress(OSError):  # a worker that died has closed its end already
            self.conn.send(("close", None))
        self.conn.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class TrafficGrid(ParallelEnv):
    """Signal control of the 3 x 3 grid; see the module docstring."""

    metadata: ClassVar[dict[str, Any]] = {"name": "sumo_grid3x3_v0", "render_modes": []}

    def __init__(self, **settings: Any) -> None:
        s = Settings(**settings)  # bad settings fail here, before a worker starts
        self._settings = asdict(s)
        self.num_seconds, self.delta_time = s.num_seconds, s.delta_time
        self.possible_agents = network.intersections()
        self.agents: list[str] = []
        self.episode: Episode | None = None  # the last finished episode
        self._worker: _Worker | None = None
        self._obs_space = spaces.Box(0.0, 1.0, (OBS_SIZE,), np.float32)
        self._act_space = spaces.Discrete(GREENS)

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space

    @property
    def worker_pid(self) -> int | None:
        """The pid of the process running the simulation (None before the first reset)."""
        return self._worker.proc.pid if self._worker else None

    def reset(
        self, seed: int | None = None, options: dict | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0] >> 1)
        if self._worker is None:
            self._worker = _Worker(self._settings)
        obs = self._worker.call("reset", int(seed))
        self.agents = list(self.possible_agents)
        return dict(zip(self.agents, obs, strict=True)), {a: {} for a in self.agents}

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[dict[str, np.ndarray], dict[str, float], dict[str, bool], dict[str, bool], dict]:
        if not self.agents or self._worker is None:
            raise RuntimeError(f"{ENV_ID}: step() outside an episode; call reset()")
        acts = np.array([int(actions.get(a, 0)) for a in self.possible_agents], np.int64)
        obs, rewards, done, episode = self._worker.call("step", acts)
        agents = self.agents
        if done:
            self.agents = []
            self.episode = Episode(**episode)
            _record(self.episode)
        return (
            dict(zip(agents, obs, strict=True)),
            {a: float(r) for a, r in zip(agents, rewards, strict=True)},
            dict.fromkeys(agents, False),
            dict.fromkeys(agents, done),
            {a: {} for a in agents},
        )

    def close(self) -> None:
        if self._worker is not None:
            worker, self._worker = self._worker, None
            worker.close()


def _record(episode: Episode) -> None:
    path = os.environ.get(STATS_ENV)
    if path:
        line = {**asdict(episode), "waiting_per_vehicle_s": episode.waiting_per_vehicle_s}
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")


def recorded_episodes(stats: Path) -> Iterator[dict[str, Any]]:
    """The episodes recorded in a ``MTRL_SUMO_STATS`` file."""
    with open(stats) as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
