"""A tiny simulation behind the Python client, for the coupling tests (run as a script).

``x' = x + 0.1 a`` per copy, ``a in [-1, 1]``; reward ``-x^2``; terminated when ``|x| > 2``;
observation ``(x, t / 20)``; the episode limit (20 steps) is left to mtrl. Copy ``i`` starts at
``((seed + i) % 7 - 3) / 3`` (the C twin ``drift_sim.c`` does the same, so their trajectories
must agree exactly). ``--fault KIND --at N`` misbehaves at the N-th STEP: ``crash`` (exit 3),
``hang`` (sleep), ``nan`` (NaN reward), ``error`` (raise: an ERROR reply), ``close`` (close the
socket and linger without answering), ``goodbye`` (leave the run cleanly: ``client.Goodbye``),
``slow`` (sleep ``--slow S`` seconds, once);
``--children K`` forks K idle child processes first (the ranks of a pretend MPI job) so tests
can check none outlives the run. ``--say TEXT`` prints TEXT on stdout and stderr at start,
``--spam N`` prints N numbered lines, ``--mark FILE`` appends a line to FILE (to count
launches), ``--obs-shape 3,4`` declares another observation shape in the handshake,
``--only N:K`` misbehaves only in a process whose base seed is ``K`` modulo ``N`` (one member
of a batch env of ``N`` single-copy processes, launch after launch). ``--announce DIR`` binds
``address`` and announces it in DIR, to join a running batch env whose ``members_dir`` it is;
``--delay S`` sleeps S seconds in every STEP (a code of known slowness).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from mtrl.coupling import client
from mtrl.coupling import protocol as P

LIMIT = 20


class Drift:
    def __init__(
        self,
        fault: str,
        at: int,
        slow: float = 0.0,
        obs_shape: list | None = None,
        only: tuple[int, int] | None = None,
    ):
        self.fault, self.at, self.steps, self.slow = fault, at, 0, slow
        self.obs_shape = obs_shape or [2]
        self.only = only
        self.delay = 0.0

    def hello(self, num_envs: int, seed: int) -> bytes:
        self.n, self.seed = num_envs, seed
        if self.only is not None and seed % self.only[0] != self.only[1]:
            self.fault = "none"
        self.x = np.zeros(num_envs, np.float32)
        self.t = np.zeros(num_envs, np.int64)
        return P.spec_json(
            {"dtype": "float32", "shape": self.obs_shape},
            {"type": "box", "dtype": "float32", "shape": [1], "low": -1.0, "high": 1.0},
            max_episode_steps=LIMIT,
            name="drift",
        )

    def _start(self, i: np.ndarray) -> None:
        self.x[i] = ((self.seed + i) % 7 - 3) / 3.0
        self.t[i] = 0

    def _obs(self) -> np.ndarray:
        return np.stack([self.x, self.t / LIMIT], axis=1).astype(np.float32)

    def reset(self) -> np.ndarray:
        self._start(np.arange(self.n))
        return self._obs()

    def step(self, actions: np.ndarray, reset_mask: np.ndarray):
        self.steps += 1
        if self.delay:
            time.sleep(self.delay)
        if self.steps == self.at:
            self.misbehave()
        live = ~reset_mask
        self.x[live] += np.float32(0.1) * actions[live, 0]
        self.t[live] += 1
        reward = np.where(live, -self.x * self.x, 0.0).astype(np.float32)
        terminated = live & (np.abs(self.x) > 2.0)
        self._start(np.flatnonzero(reset_mask))
        if self.fault == "nan" and self.steps >= self.at:
            reward[0] = np.nan
        return self._obs(), reward, terminated, np.zeros(self.n, bool)

    def misbehave(self) -> None:
        if self.fault == "crash":
            os._exit(3)
        if self.fault == "hang":
            time.sleep(3600)
        if self.fault == "error":
            raise RuntimeError("the solver diverged (injected)")
        if self.fault == "close":
            raise SystemExit(0)
        if self.fault == "goodbye":
            raise client.Goodbye
        if self.fault == "slow":
            time.sleep(self.slow)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("address")
    ap.add_argument("--fault", default="none")
    ap.add_argument("--at", type=int, default=0)
    ap.add_argument("--children", type=int, default=0)
    ap.add_argument("--bind", action="store_true")
    ap.add_argument("--slow", type=float, default=0.0)
    ap.add_argument("--say", default="")
    ap.add_argument("--spam", type=int, default=0)
    ap.add_argument("--mark", default="")
    ap.add_argument("--obs-shape", default="2")
    ap.add_argument("--only", default="")
    ap.add_argument("--announce", default=None)
    ap.add_argument("--delay", type=float, default=0.0)
    args = ap.parse_args()
    if args.mark:
        with open(args.mark, "a") as f:
            f.write(f"{os.getpid()}\n")
    if args.say:
        print(f"{args.say} (stdout)", flush=True)
        print(f"{args.say} (stderr)", file=sys.stderr, flush=True)
    for i in range(args.spam):
        print(f"drift_sim spam line {i:08d} " + "x" * 40)
    sys.stdout.flush()
    for _ in range(args.children):
        if os.fork() == 0:  # a pretend rank: idles until killed
            while True:
                time.sleep(1)
    try:
        shape = [int(v) for v in args.obs_shape.split(",")]
        only = tuple(int(v) for v in args.only.split(":")) if args.only else None
        sim = Drift(args.fault, args.at, args.slow, shape, only)
        sim.delay = args.delay
        if args.announce:
            why = client.serve(
                sim, args.address, bind=True, exit_on_disconnect=False, announce=args.announce
            )
        else:
            why = client.serve(sim, args.address, bind=args.bind)
    except SystemExit:
        time.sleep(3600)  # 'close': socket closed by serve's finally; linger, answering nothing
        return 0
    print(f"drift_sim: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
