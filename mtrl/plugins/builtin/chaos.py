"""Built-in plugin ``chaos``: wrap any registered env and inject faults on purpose.

``chaos/wrap`` steps the env named by ``env`` (with its own ``env_kwargs``; spaces, seeding
and auto-reset are the wrapped env's) and, deterministically from its kwargs, breaks it:

* ``raise_after=N``: ``env.step`` raises ``RuntimeError`` after N good batch steps (N=0: the
  first step raises); likewise ``nan_after`` (a NaN, or ``nan_value``, in ``nan_in``: the
  ``reward`` or the ``obs`` of copy 0), ``hang_after`` (sleeps ``hang_s`` seconds),
  ``kill_after`` (SIGKILL to its own process), ``segfault_after`` (a real segmentation fault);
* ``reset_fault``: one of those kinds, injected in the first ``reset`` instead;
* ``step_delay_s``: every step of every instance sleeps this long (a slow env, not a fault).

Which env instances are faulty (each actor start builds a fresh one, with a new seed):

* ``seeds=[...]``: only instances built with one of these seeds (the pool gives the k-th actor
  started for a task the seed ``task seed + k * num_envs``);
* ``probability=p``: each instance is faulty with probability p, drawn from its seed (and
  ``chaos_seed``), so the same seed always decides the same way;
* ``faulty_instances=n`` with ``marker_dir``: only the first n instances to reset, counted with
  marker files so the count holds across processes and restarts.

``kill_after``/``segfault_after`` only fire inside an actor worker process (or an eval worker
of ``mtrl eval --workers``); in the learner's process (serial mode, thread actors) they raise
instead, since the signal would end the run.
See docs/FAULTS.md.
"""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np

from mtrl.errors import EnvKwargsError
from mtrl.plugins import hookimpl
from mtrl.plugins.batch_env import BatchEnv, Obs, StepBatch

KINDS = ("raise", "nan", "hang", "kill", "segfault")
ACTOR_PROCESS_ENV = "MTRL_ACTOR_PROCESS"  # set in actor and eval worker processes


class ChaosError(RuntimeError):
    """The fault ``chaos/wrap`` injects with ``raise_after`` (or in place of a signal)."""


class ChaosEnv(BatchEnv):
    """A batch env that behaves like the one it wraps until its scheduled fault."""

    def __init__(
        self,
        inner: BatchEnv,
        seed: int,
        *,
        after: dict[str, int],
        reset_fault: str | None,
        nan_in: str,
        nan_value: float,
        hang_s: float,
        step_delay_s: float,
        faulty: bool | None,
        marker: tuple[Path, int] | None,
    ) -> None:
        self.inner = inner
        self.num_envs = inner.num_envs
        self.single_observation_space = inner.single_observation_space
        self.single_action_space = inner.single_action_space
        self.seed = seed
        self.after = after
        self.reset_fault = reset_fault
        self.nan_in, self.nan_value, self.hang_s = nan_in, nan_value, hang_s
        self.step_delay_s = step_delay_s
        self.faulty = faulty  # None: decided at the first reset (marker files)
        self._marker = marker
        self.steps = 0

    def _claim(self) -> bool:
        """Take the next instance number from the marker directory; faulty if it is < n."""
        assert self._marker is not None
        directory, n = self._marker
        directory.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            try:
                fd = os.open(directory / f"instance-{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.write(fd, f"{os.getpid()} seed={self.seed}\n".encode())
            os.close(fd)
            return True
        return False

    def _inject(self, kind: str, where: str) -> None:
        what = f"chaos/wrap (seed {self.seed}): injected {kind} {where}"
        if kind == "raise":
            raise ChaosError(what)
        if kind == "hang":
            time.sleep(self.hang_s)
            return
        if not os.environ.get(ACTOR_PROCESS_ENV):
            raise ChaosError(
                f"{what} refused: not in an actor worker process (serial mode or thread "
                "actors), where the signal would end the whole run; raising instead"
            )
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "segfault":
            import ctypes

            ctypes.string_at(0)  # reads address 0: SIGSEGV
        time.sleep(5)  # the signal is on its way

    def reset(self) -> Obs:
        if self.faulty is None:
            self.faulty = self._claim()
        obs = self.inner.reset()
        if self.faulty and self.reset_fault is not None:
            if self.reset_fault == "nan":
                return self._poison_obs(obs)
            self._inject(self.reset_fault, "in reset")
        return obs

    def _poison_obs(self, obs: Obs) -> Obs:
        arr = next(iter(obs.values())) if isinstance(obs, dict) else obs
        if not (isinstance(arr, np.ndarray) and arr.dtype.kind == "f"):
            raise ChaosError("chaos/wrap: nan_in='obs' needs float observations; use 'reward'")
        arr[(0,) * arr.ndim] = self.nan_value
        return obs

    def step(self, actions: Any) -> StepBatch:
        n, self.steps = self.steps, self.steps + 1
        if self.step_delay_s > 0:
            time.sleep(self.step_delay_s)
        if self.faulty:
            for kind, at in self.after.items():
                if kind != "nan" and at == n:
                    self._inject(kind, f"after {n} steps")
        out = self.inner.step(actions)
        if self.faulty and self.after.get("nan") == n:
            if self.nan_in == "reward":
                out.reward = np.array(out.reward, dtype=np.float32)
                out.reward[0] = self.nan_value
            else:
                out.obs = self._poison_obs(out.obs)
        return out

    def close(self) -> None:
        self.inner.close()


def make_chaos(
    num_envs: int,
    seed: int = 0,
    *,
    env: str = "gymnasium/CartPole-v1",
    env_kwargs: dict[str, Any] | None = None,
    raise_after: int | None = None,
    nan_after: int | None = None,
    hang_after: int | None = None,
    kill_after: int | None = None,
    segfault_after: int | None = None,
    reset_fault: str | None = None,
    nan_in: str = "reward",
    nan_value: float = math.nan,
    hang_s: float = 3600.0,
    step_delay_s: float = 0.0,
    seeds: list[int] | None = None,
    probability: float = 1.0,
    chaos_seed: int = 0,
    faulty_instances: int | None = None,
    marker_dir: str | None = None,
) -> BatchEnv:
    """Build ``env`` and wrap it with the faults these kwargs schedule (module docstring)."""
    from mtrl.plugins import get_plugins

    after = {
        k: v
        for k, v in (
            ("raise", raise_after),
            ("nan", nan_after),
            ("hang", hang_after),
            ("kill", kill_after),
            ("segfault", segfault_after),
        )
        if v is not None
    }
    problems = [f"{k}_after must be an int >= 0, got {v!r}" for k, v in after.items() if v < 0]
    if reset_fault is not None and reset_fault not in KINDS:
        problems.append(f"reset_fault must be one of {', '.join(KINDS)}, got {reset_fault!r}")
    if nan_in not in ("reward", "obs"):
        problems.append(f"nan_in must be 'reward' or 'obs', got {nan_in!r}")
    if math.isfinite(nan_value):
        problems.append(f"nan_value must be nan, inf or -inf, got {nan_value!r}")
    if not (math.isfinite(step_delay_s) and step_delay_s >= 0):
        problems.append(f"step_delay_s must be a number >= 0, got {step_delay_s!r}")
    if not 0.0 <= probability <= 1.0:
        problems.append(f"probability must be in [0, 1], got {probability!r}")
    if (faulty_instances is None) != (marker_dir is None):
        problems.append("faulty_instances and marker_dir go together")
    if problems:
        raise EnvKwargsError("chaos/wrap: " + "; ".join(problems))
    faulty: bool | None = seeds is None or seed in seeds
    if faulty and probability < 1.0:
        faulty = bool(np.random.default_rng([seed, chaos_seed]).random() < probability)
    marker = None
    if faulty and faulty_instances is not None and marker_dir is not None:
        faulty, marker = None, (Path(marker_dir), faulty_instances)
    inner = get_plugins().envs.get(env).build(num_envs, seed, **(env_kwargs or {}))
    return ChaosEnv(
        inner,
        seed,
        after=after,
        reset_fault=reset_fault,
        nan_in=nan_in,
        nan_value=nan_value,
        hang_s=hang_s,
        step_delay_s=step_delay_s,
        faulty=faulty,
        marker=marker,
    )


@hookimpl
def mtrl_register_envs(register: Any) -> None:
    """Offer ``chaos/wrap``."""
    register.env(
        "wrap",
        make_chaos,
        description="any env (kwarg env, default gymnasium/CartPole-v1) with injected faults: "
        "raise_after, nan_after, hang_after, kill_after, segfault_after (docs/FAULTS.md)",
    )
