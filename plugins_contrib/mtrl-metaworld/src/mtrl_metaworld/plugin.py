"""The mtrl plugin: registers ``metaworld/<task>`` for each of Meta-World's 50 tasks.

Env kwargs (``env_kwargs`` in a task's config):

* ``one_hot``: ``MT10`` or ``MT50`` appends the task's one-hot id within that benchmark to the
  observation (Meta-World's ``use_one_hot``); unset, the 39 floats alone (mtrl's per-task
  encoders already know which task they serve).
* ``goals_seed`` (0): the seed of the task's 50 goals, shared by every copy and process.
* ``max_episode_steps`` (500): the benchmark's path length, or fewer.

Each copy draws a goal from the 50 on every reset; ``info["success"]`` is reported, so
``mtrl train`` logs ``task/<name>/success`` and ``mtrl eval`` the success rate (an episode
succeeds if it succeeds at any step: Meta-World's protocol). Meta-World is imported when an
env is built, never at registration.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from mtrl.plugins import BatchEnv, EnvRegistrar, batch_env_from_gymnasium, hookimpl
from mtrl_metaworld.tasks import BENCHMARKS, MAX_PATH_LENGTH, MT10, MT50


def one_hot_id(name: str, benchmark: str | None) -> tuple[int, int] | None:
    """``(index, size)`` of task ``name`` in ``benchmark`` (None: no one-hot id)."""
    if benchmark is None:
        return None
    if benchmark not in BENCHMARKS:
        raise ValueError(f"one_hot must be one of {sorted(BENCHMARKS)} or unset, got {benchmark!r}")
    tasks = BENCHMARKS[benchmark]
    if name not in tasks:
        raise ValueError(f"one_hot={benchmark}: {name} is not one of its tasks; use MT50")
    return tasks.index(name), len(tasks)


def make_task(
    name: str,
    num_envs: int,
    seed: int = 0,
    one_hot: str | None = None,
    goals_seed: int = 0,
    max_episode_steps: int = MAX_PATH_LENGTH,
) -> BatchEnv:
    """``num_envs`` copies of Meta-World task ``name`` stepped in this process."""
    from mtrl_metaworld.env import MetaWorldTask

    make = partial(MetaWorldTask, name, goals_seed, max_episode_steps, one_hot_id(name, one_hot))
    return batch_env_from_gymnasium(make, num_envs, seed)


def _description(name: str) -> str:
    where = "MT10 and MT50" if name in MT10 else "MT50"
    return f"Meta-World {name} (Sawyer arm, 4-D Box actions, 50 goals; in {where}); success flag"


@hookimpl
def mtrl_register_envs(register: EnvRegistrar) -> None:
    """Offer every Meta-World task; spaces depend on ``one_hot``, so they are found by building
    one copy with the task's kwargs."""
    for name in MT50:
        factory: Any = partial(make_task, name)
        register.env(
            name,
            factory,
            description=_description(name),
            stochastic=False,  # deterministic physics; only the goal and start are random
            max_episode_steps=MAX_PATH_LENGTH,
        )
