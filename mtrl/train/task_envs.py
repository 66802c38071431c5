"""Building a task's batch env from its config: numpy envs for actors, tensor envs for Anakin."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import torch

from mtrl.actors.pool import TaskSetup
from mtrl.config import ExperimentConfig
from mtrl.config.loading import reserved_env_kwargs_problems
from mtrl.coupling.protocol import SimulationError
from mtrl.errors import ConfigError, EnvKwargsError, UserError
from mtrl.learner.trainable import UnsupportedSpaceError, check_trainable
from mtrl.plugins import BatchEnv, EnvSpec
from mtrl.plugins.external import ExternalSim, sim_logs
from mtrl.train.env_failures import SimulationStartError


def check_env_kwargs(cfg: ExperimentConfig, i: int) -> None:
    """Reject ``num_envs``/``seed`` in task ``i``'s env_kwargs (they are task fields) with a
    config error, not the factory's "got multiple values" TypeError. Configs loaded from YAML
    are checked already; this covers ones built in code."""
    problems = [
        f"tasks[{i}].env_kwargs.{key}: {problem}"
        for key, problem in reserved_env_kwargs_problems(cfg.tasks[i].env_kwargs)
    ]
    if problems:
        raise ConfigError("\n".join(problems), problems=problems)


def env_kwargs(spec: EnvSpec, cfg: ExperimentConfig, i: int) -> dict[str, Any]:
    """Task ``i``'s env_kwargs, with the ``scheduler.member_*`` settings for an external env
    (:mod:`mtrl.plugins.external.members`) where the task's env_kwargs do not set them."""
    kwargs = dict(cfg.tasks[i].env_kwargs)
    if isinstance(spec.make, ExternalSim) and spec.make.command is not None:
        sc = cfg.scheduler
        defaults = {
            "member_restart": sc.member_restart,
            "member_max_restarts": sc.member_max_restarts,
            "member_window_s": sc.member_window_s,
        }
        kwargs = {**defaults, **kwargs}
    return kwargs


def build_env(spec: EnvSpec, cfg: ExperimentConfig, i: int, num_envs: int, seed: int) -> BatchEnv:
    """Task ``i``'s batch env of ``num_envs`` copies with its env_kwargs (errors name the
    task)."""
    check_env_kwargs(cfg, i)
    with task_errors(cfg, i):
        return spec.build(num_envs, seed, **env_kwargs(spec, cfg, i))


@contextmanager
def task_errors(cfg: ExperimentConfig, i: int) -> Iterator[None]:
    """Building task ``i``'s env inside: a refused kwarg or a simulation that cannot start
    becomes one line naming the task (:class:`SimulationStartError`), and a simulation's logs
    go to the task's folder."""
    task = cfg.tasks[i]
    try:
        with sim_logs.for_task(task.key):
            yield
    except EnvKwargsError as e:
        raise EnvKwargsError(f"tasks[{i}].env_kwargs: {e}") from e
    except SimulationError as e:  # an external simulation's (mtrl/plugins/external)
        if isinstance(e, UserError):  # spaces that differ from the registration: one line
            raise UserError(f"tasks[{i}].env: {e}") from e
        raise SimulationStartError(f"tasks[{i}] ({task.key})", e) from e


def declared_spaces_hold(spec: EnvSpec) -> bool:
    """Whether ``spec``'s declared spaces hold whatever its env_kwargs: its factory refuses an
    env that disagrees with them (an external simulation whose plugin declared them), so that
    nothing has to be built (a code launched) to learn a task's spaces."""
    return bool(getattr(spec.make, "keeps_declared_spaces", False))


def num_envs_problems(cfg: ExperimentConfig, specs: Sequence[EnvSpec]) -> list[tuple[int, str]]:
    """``(task index, problem)`` for each task whose ``num_envs`` is not a multiple of its
    env's ``num_envs_multiple`` (the agent slots of one multi-agent game)."""
    found = []
    for i, (task, spec) in enumerate(zip(cfg.tasks, specs, strict=True)):
        m = spec.num_envs_multiple
        if task.num_envs % m:
            lower, upper = task.num_envs // m * m, (task.num_envs // m + 1) * m
            fix = f"{lower} or {upper}" if lower else str(upper)
            found.append(
                (i, f"{task.env} runs {m} agent slots per game: num_envs {task.num_envs} is not "
                 f"a multiple of {m} (use {fix})")
            )  # fmt: skip
    return found


def command_problems(cfg: ExperimentConfig, specs: Sequence[EnvSpec]) -> list[tuple[int, str, str]]:
    """``(task index, field, problem)`` for each task whose env_kwargs name a key its env does
    not take (``env_kwargs``), or whose env runs a program that is missing or not executable
    (an external simulation's command, its template filled from the task's env_kwargs), or
    whose bounds of members that join and leave are refused
    (:mod:`mtrl.plugins.external.roster`) (``env``). Found without starting anything; other
    bad env_kwargs are left to building the env, which names them."""
    found = []
    for i, (task, spec) in enumerate(zip(cfg.tasks, specs, strict=True)):
        unknown = getattr(spec.make, "kwargs_problem", None)
        if callable(unknown) and (problem := unknown(task.env_kwargs)):
            found.append((i, "env_kwargs", f"{task.env}: {problem}"))
            continue
        check = getattr(spec.make, "command_problem", None)
        if not callable(check):
            continue
        try:
            problem = check(task.env_kwargs)
        except Exception:  # bad kwargs: reported, with the env id, when the env is built
            continue
        members = getattr(spec.make, "members_problem", None)
        if not problem and callable(members):  # attached codes that join and leave
            problem = members(task.env_kwargs, task.num_envs)
        if problem:
            found.append((i, "env", f"{task.env}: {problem}"))
    return found


def check_commands(cfg: ExperimentConfig, specs: Sequence[EnvSpec]) -> None:
    """Raise :class:`UserError` (one line per task) for :func:`num_envs_problems` and
    :func:`command_problems`."""
    problems = [f"tasks[{i}].num_envs: {text}" for i, text in num_envs_problems(cfg, specs)]
    problems += [f"tasks[{i}].{at}: {text}" for i, at, text in command_problems(cfg, specs)]
    if problems:
        raise UserError("\n".join(problems), problems=problems)


def task_spaces(
    spec: EnvSpec, cfg: ExperimentConfig, i: int, env: BatchEnv | None
) -> tuple[gym.Space, gym.Space]:
    """Task ``i``'s (observation, action) spaces: from its env when one was built, else from
    the spec (building one copy only when its kwargs may change the spaces, which declared
    spaces that hold do not: :func:`declared_spaces_hold`).

    Raises :class:`UserError` naming the task, its env id and the part of the space when the
    learner cannot train on them (:func:`mtrl.learner.trainable.check_trainable`).
    """
    if env is not None:
        found = env.single_observation_space, env.single_action_space
    else:
        found = probe_spaces(spec, cfg, i)
    try:
        check_trainable(*found, cfg.learner.model)
    except UnsupportedSpaceError as e:
        raise UserError(f"tasks[{i}].env: {cfg.tasks[i].env}: {e.path}: {e.reason}") from e
    return found


def probe_spaces(spec: EnvSpec, cfg: ExperimentConfig, i: int) -> tuple[gym.Space, gym.Space]:
    """Task ``i``'s spaces without a trainability check: the spec's, or those of the smallest
    env its kwargs build (``num_envs_multiple`` copies) when the kwargs may change them."""
    if not cfg.tasks[i].env_kwargs or declared_spaces_hold(spec):
        with task_errors(cfg, i):  # undeclared spaces: the spec builds an env to learn them
            return spec.observation_space, spec.action_space
    probe = build_env(spec, cfg, i, spec.num_envs_multiple, cfg.task_seed(i))
    try:
        return probe.single_observation_space, probe.single_action_space
    finally:
        probe.close()


def build_anakin_env(
    spec: EnvSpec, cfg: ExperimentConfig, i: int, seed: int, device: torch.device
) -> BatchEnv:
    """Task ``i``'s tensor-native env on the learner's device (Anakin)."""
    task = cfg.tasks[i]
    check_env_kwargs(cfg, i)
    kwargs = {**task.env_kwargs, "device": str(device)}
    try:
        env = spec.build(task.num_envs, seed, **kwargs)
    except (EnvKwargsError, TypeError) as e:
        raise UserError(
            f"tasks[{i}] ({task.env}): anakin needs a tensor-native env that takes a `device` "
            f"(e.g. tensor/CartPole-v1; `mtrl envs --plugin tensor`): {e}"
        ) from e
    if not hasattr(env, "step_tensor"):
        env.close()
        raise UserError(
            f"tasks[{i}] ({task.env}): anakin needs a tensor-native env "
            "(e.g. tensor/CartPole-v1; `mtrl envs --plugin tensor`)"
        )
    return env


def build_tasks(
    cfg: ExperimentConfig, specs: list[EnvSpec], seed_offset: int, device: torch.device
) -> tuple[list[TaskSetup], list[BatchEnv | None]]:
    """Each task's setup for the actors, and the envs this process steps itself: serial-mode
    and Anakin tasks (None for the others, whose actors build their own). On a failure the
    envs already built are closed before the error goes on. The caller refuses a task whose
    env's program is missing first (:func:`check_commands`)."""
    serial = cfg.actors.mode == "serial"
    setups: list[TaskSetup] = []
    envs: list[BatchEnv | None] = []
    try:
        for i, (task, spec) in enumerate(zip(cfg.tasks, specs, strict=True)):
            seed = cfg.task_seed(i) + seed_offset
            env = None
            if task.anakin:
                env = build_anakin_env(spec, cfg, i, seed, device)
            elif serial:
                env = build_env(spec, cfg, i, task.num_envs, seed)
            envs.append(env)
            obs_space, act_space = task_spaces(spec, cfg, i, env)
            setups.append(
                TaskSetup(
                    index=i,
                    name=task.key,
                    env_id=task.env,
                    num_envs=task.num_envs,
                    seed=seed,
                    reward_scale=task.reward_scale,
                    observation_space=obs_space,
                    action_space=act_space,
                    env_kwargs=env_kwargs(spec, cfg, i),
                )
            )
    except BaseException:
        for env in envs:
            if env is not None:
                env.close()
        raise
    return setups, envs
