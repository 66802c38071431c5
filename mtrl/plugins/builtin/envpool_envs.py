"""Built-in plugin: envpool's C++ thread-pool environments as mtrl batch envs.

Ids are ``envpool/<task>`` for envpool's Atari (``envpool/Pong-v5``), classic-control
(``envpool/CartPole-v1``) and gymnasium-MuJoCo (``envpool/HalfCheetah-v4``) tasks. envpool's
other families (DMC, MetaWorld, procgen, ...) are not offered: their spaces or dependencies do
not fit mtrl's contract yet (DMC's dict bounds, for one, do not contain its observations).

What a user must know:

* **Auto-reset.** envpool's native rule *is* mtrl's next-step rule: after a step that returned
  ``terminated or truncated`` for copy ``i``, the next step ignores ``actions[i]`` and returns
  its first observation with reward 0 and both flags false. It is passed through unchanged (the
  tests check it, sync and async). Rewards come out float32, flags bool.
* **Seeding.** ``make(num_envs, seed)`` seeds copy ``i`` with ``seed + i`` (envpool's own rule
  for an int seed), once, at construction; later resets continue each copy's stream.
* **Async.** ``batch_size < num_envs`` (kwarg ``batch_size``; ``num_envs`` must be a multiple of
  it) gives an :class:`~mtrl.plugins.AsyncBatchEnv`: ``send``/``recv`` step sub-batches of
  copies; ``reset``/``step`` still step the whole batch (ordered by copy) and may only be
  called when no ``send`` is awaiting its ``recv``.
* **Threads.** envpool runs ``min(batch_size, CPU cores)`` worker threads by default; pass
  ``num_threads`` to override (``thread_affinity_offset`` pins them).
* **Atari** uses envpool's preprocessing: 84x84 grey frames, 4-frame stack (channel first,
  ``(4, 84, 84)`` uint8), frame skip 4, up to 30 no-op starts, FIRE on reset, no sticky actions
  (``repeat_action_probability=0``), raw (unclipped) rewards, full-game episodes, truncation at
  ``max_episode_steps=27000`` agent steps. Every envpool option of a task is a kwarg (for
  example ``max_episode_steps``, ``frame_skip``, ``repeat_action_probability``); an unknown one
  raises ``TypeError`` naming the env id. Options that change spaces (``stack_num``,
  ``img_height``, ...) make the built env's spaces differ from the registered ones.
* **Spaces** are registered up front: classic control's and MuJoCo's read from envpool's spec
  (cheap), Atari's from :mod:`~mtrl.plugins.builtin.atari_spaces` (reading them from the spec
  would load each ROM); an Atari game missing from that table has its spaces found lazily.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import warnings
from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np

from mtrl.errors import PluginUnavailable
from mtrl.plugins import hookimpl
from mtrl.plugins.batch_env import AsyncBatchEnv, BatchEnv, Obs, StepBatch
from mtrl.plugins.builtin.atari_spaces import atari_spaces
from mtrl.plugins.builtin.scores import CLASSIC_RANDOM_SOLVED, atari_scores

#: envpool module of a family -> (family name, dynamics deterministic given the state?)
_FAMILIES: dict[str, tuple[str, bool | None]] = {
    "envpool.atari": ("atari", None),  # no-op starts; sticky actions when asked for
    "envpool.classic_control": ("classic_control", False),
    "envpool.mujoco.gym": ("mujoco", False),
}
#: envpool config keys mtrl sets itself (``make``'s own arguments) or that must not change.
_MANAGED = frozenset(
    {"num_envs", "batch_size", "seed", "env_seed", "base_path", "gym_reset_return_info", "task"}
)
#: options envpool's ``make`` takes besides the spec's config keys.
_MAKE_OPTIONS = frozenset(
    {
        "from_pixels",
        "render_mode",
        "render_env_id",
        "render_width",
        "render_height",
        "render_camera_id",
    }
)


def _envpool() -> Any:
    """The envpool module, or PluginUnavailable with the install command."""
    try:
        import envpool
    except ImportError as e:
        raise PluginUnavailable("envpool is not installed: pip install 'mtrl[envpool]'") from e
    return envpool


@contextlib.contextmanager
def _quiet_spaces() -> Iterator[None]:
    """envpool builds float32 Boxes from float64 bounds; gymnasium warns each time. Harmless."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*precision lowered", category=UserWarning)
        yield


def _check_options(env_id: str, import_path: str, spec_cls: str, kwargs: dict[str, Any]) -> None:
    """Reject unknown options before envpool does, with a message naming the env and the fix."""
    cls = getattr(importlib.import_module(import_path), spec_cls)
    valid = (set(cls._config_keys) - _MANAGED) | _MAKE_OPTIONS
    for key in kwargs:
        if key not in valid:
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(
                f"{env_id}: unknown option {key!r}{hint} (valid: {', '.join(sorted(valid))})"
            )


def make_envpool(
    num_envs: int, seed: int = 0, *, task: str, batch_size: int | None = None, **kwargs: Any
) -> BatchEnv:
    """Build ``num_envs`` copies of envpool task ``task`` seeded ``seed + i``.

    ``batch_size < num_envs`` returns an :class:`EnvpoolAsyncBatchEnv`; other kwargs are envpool
    options of the task (``max_episode_steps``, ``num_threads``, ``frame_skip``, ...).
    """
    envpool = _envpool()
    env_id = f"envpool/{task}"
    import_path, spec_cls, _ = envpool.registration.registry.specs[task]
    _check_options(env_id, import_path, spec_cls, kwargs)
    batch = num_envs if batch_size is None else int(batch_size)
    if not 1 <= batch <= num_envs or num_envs % batch:
        raise ValueError(
            f"{env_id}: batch_size must divide num_envs and lie in [1, num_envs]; got "
            f"batch_size={batch_size} for num_envs={num_envs}"
        )
    try:
        with _quiet_spaces():
            pool = envpool.make_gymnasium(
                task, num_envs=num_envs, batch_size=batch, seed=int(seed), **kwargs
            )
    except (AssertionError, RuntimeError, ValueError) as e:  # envpool validates with asserts
        raise ValueError(f"{env_id}: envpool rejected the options {kwargs}: {e}") from e
    if batch < num_envs:
        return EnvpoolAsyncBatchEnv(pool, env_id, batch)
    return EnvpoolBatchEnv(pool, env_id)


class EnvpoolBatchEnv(BatchEnv):
    """A synchronous envpool pool (``batch_size == num_envs``); results ordered by copy."""

    def __init__(self, pool: Any, env_id: str) -> None:
        self._pool: Any = pool
        self.env_id = env_id
        self.num_envs = int(pool.config["num_envs"])
        with _quiet_spaces():
            self.single_observation_space = pool.single_observation_space
            self.single_action_space = pool.single_action_space
        self._all_ids = np.arange(self.num_envs, dtype=np.int32)

    def reset(self) -> Obs:
        obs, info = self._pool.reset()
        ids = info["env_id"]
        return obs if np.array_equal(ids, self._all_ids) else obs[np.argsort(ids)]

    def step(self, actions: Any) -> StepBatch:
        obs, reward, terminated, truncated, info = self._pool.step(np.asarray(actions))
        out = _batch(obs, reward, terminated, truncated)
        ids = info["env_id"]
        if not np.array_equal(ids, self._all_ids):  # envpool orders sync results; be sure
            order = np.argsort(ids)
            out = StepBatch(
                out.obs[order], out.reward[order], out.terminated[order], out.truncated[order]
            )
        return out

    def close(self) -> None:
        # envpool's pools have no close(); dropping the last reference stops their threads.
        self._pool = None


class EnvpoolAsyncBatchEnv(EnvpoolBatchEnv, AsyncBatchEnv):
    """An envpool pool stepped ``batch_size`` copies at a time through ``send``/``recv``.

    ``reset``/``step`` run whole-batch steps on top of ``send``/``recv``, scattering the
    sub-batches back into copy order; they refuse to run while sent actions await ``recv``.
    """

    def __init__(self, pool: Any, env_id: str, batch_size: int) -> None:
        super().__init__(pool, env_id)
        self.batch_size = batch_size
        self._in_flight = 0  # copies sent (or reset) whose results recv has not returned

    def async_reset(self) -> None:
        self._require_idle("async_reset")
        self._pool.async_reset()
        self._in_flight = self.num_envs

    def send(self, actions: Any, env_ids: np.ndarray) -> None:
        env_ids = np.asarray(env_ids, dtype=np.int32)
        self._pool.send(np.asarray(actions), env_ids)
        self._in_flight += len(env_ids)

    def recv(self) -> tuple[np.ndarray, StepBatch]:
        if self._in_flight < self.batch_size:
            raise RuntimeError(
                f"{self.env_id}: recv() would block forever: only {self._in_flight} copies are "
                f"stepping and a batch is {self.batch_size}; send() more first"
            )
        obs, reward, terminated, truncated, info = self._pool.recv()
        self._in_flight -= self.batch_size
        return np.asarray(info["env_id"]), _batch(obs, reward, terminated, truncated)

    def reset(self) -> Obs:
        self.async_reset()
        return self._gather().obs

    def step(self, actions: Any) -> StepBatch:
        self._require_idle("step")
        self.send(actions, self._all_ids)
        return self._gather()

    def _gather(self) -> StepBatch:
        """recv until every copy reported once; place each sub-batch at its copies' rows."""
        parts = [self.recv() for _ in range(self.num_envs // self.batch_size)]
        first = parts[0][1].obs
        out = StepBatch(
            obs=np.empty((self.num_envs, *first.shape[1:]), dtype=first.dtype),
            reward=np.empty(self.num_envs, dtype=np.float32),
            terminated=np.empty(self.num_envs, dtype=bool),
            truncated=np.empty(self.num_envs, dtype=bool),
        )
        for ids, part in parts:
            out.obs[ids] = part.obs
            out.reward[ids] = part.reward
            out.terminated[ids] = part.terminated
            out.truncated[ids] = part.truncated
        return out

    def _require_idle(self, what: str) -> None:
        if self._in_flight:
            raise RuntimeError(
                f"{self.env_id}: {what}() while {self._in_flight} sent copies await recv(); "
                "recv() them first"
            )


def _batch(obs: Any, reward: Any, terminated: Any, truncated: Any) -> StepBatch:
    return StepBatch(
        obs=obs,
        reward=np.asarray(reward, dtype=np.float32),
        terminated=np.asarray(terminated, dtype=bool),
        truncated=np.asarray(truncated, dtype=bool),
    )


@hookimpl
def mtrl_register_envs(register: Any) -> None:
    """Offer envpool's Atari, classic-control and gymnasium-MuJoCo tasks (aliases skipped)."""
    envpool = _envpool()
    specs = envpool.registration.registry.specs
    for task in envpool.list_all_envs():
        import_path, _, config = specs[task]
        if import_path not in _FAMILIES or "/" in task:  # "phys2d/CartPole-v1" is an alias
            continue
        family, stochastic = _FAMILIES[import_path]
        observation_space = action_space = None
        random_score = reference_score = None
        if family == "atari":
            game = task.rsplit("-v", 1)[0]
            random_score, reference_score = atari_scores(game)
            observation_space, action_space = atari_spaces(game)
        else:  # cheap for these families; Atari's spec would load the ROM
            with _quiet_spaces():
                spec = envpool.make_spec(task)
                observation_space = spec.gymnasium_observation_space
                action_space = spec.gymnasium_action_space
            random_score, reference_score = CLASSIC_RANDOM_SOLVED.get(task, (None, None))
        register.env(
            task,
            partial(make_envpool, task=task),
            observation_space=observation_space,
            action_space=action_space,
            description=f"envpool {task} ({family})",
            stochastic=stochastic,
            random_score=random_score,
            reference_score=reference_score,
            max_episode_steps=config.get("max_episode_steps"),
        )
