"""The env conformance suite: every backend and plugin env must pass the same checks.

Checks, in order (each failure raises :class:`ConformanceError` naming the env and the rule):

1. ``build``: ``make`` returns a BatchEnv of the requested size whose single spaces equal the
   spaces the plugin declared;
2. ``trainable``: the learner can train on those spaces: the task's encoders and policy head
   are built by the same code ``mtrl train`` uses (:mod:`mtrl.learner.trainable`) and run once;
   a failure names the part of the space, e.g. ``obs['graph']: Graph spaces are not supported``;
3. ``spaces``: every observation of ``reset`` and ``step`` is in the observation space with the
   right batch shape and dtype; rewards are finite float32 ``(N,)``, flags (and the success
   flags of an env that reports them) bool ``(N,)``;
4. ``auto-reset``: a step after ``terminated or truncated`` returns reward 0 and both flags false
   (next-step rule), and the run must see at least one episode end (``require_episode_end``);
5. ``seeding``: two envs made with the same seed and fed the same actions agree exactly, and
   copies seeded differently do not all start identically in a stochastic-reset env (not
   asserted: some games have one start state);
6. ``spawn``: a spawned process that rebuilds the registry from entry points produces the same
   trajectory (skipped for envs registered in-process only);
7. ``close``: closing twice is harmless.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from mtrl.plugins.batch_env import BatchEnv, StepBatch
from mtrl.plugins.spaces import batch_item, batch_len, random_actions
from mtrl.plugins.spec import EnvSpec


class ConformanceError(AssertionError):
    """An env broke one rule of the batch-env contract."""


@dataclass
class ConformanceReport:
    env_id: str
    steps: int = 0
    episode_ends: int = 0
    checks: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _fail(env_id: str, rule: str, msg: str) -> NoReturn:
    raise ConformanceError(f"{env_id}: [{rule}] {msg}")


def _to_numpy(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_to_numpy(v) for v in x)
    if hasattr(x, "detach"):  # torch tensor from a device-native env
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _check_obs(env_id: str, env: BatchEnv, obs: Any, where: str) -> None:
    obs = _to_numpy(obs)
    try:
        rows = batch_len(obs)
        items = [batch_item(obs, i) for i in range(min(rows, env.num_envs))]
    except (IndexError, KeyError, TypeError, StopIteration) as e:
        _fail(
            env_id,
            "spaces",
            f"{where}: cannot take one copy's observation from the batch ({type(e).__name__}: "
            f"{e}); a batch must be an array with a leading num_envs axis, or a dict or tuple "
            "of such arrays",
        )
    if rows != env.num_envs:
        _fail(env_id, "spaces", f"{where}: batch has {rows} rows, not {env.num_envs}")
    space = env.single_observation_space
    for i, item in enumerate(items):
        if not space.contains(item):
            desc = getattr(item, "dtype", type(item).__name__), getattr(item, "shape", "")
            _fail(env_id, "spaces", f"{where}: observation of copy {i} {desc} is not in {space}")


def _check_trainable(env_id: str, env: BatchEnv) -> None:
    from mtrl.learner.trainable import UnsupportedSpaceError, check_trainable  # imports torch

    try:
        check_trainable(env.single_observation_space, env.single_action_space)
    except UnsupportedSpaceError as e:
        _fail(env_id, "trainable", f"{e.path}: {e.reason}")


def _check_step(env_id: str, env: BatchEnv, out: Any, t: int) -> StepBatch:
    if not isinstance(out, StepBatch):
        _fail(env_id, "spaces", f"step returned {type(out).__name__}, not StepBatch")
    n = env.num_envs
    reward, term, trunc = (
        _to_numpy(out.reward),
        _to_numpy(out.terminated),
        _to_numpy(out.truncated),
    )
    if reward.shape != (n,) or reward.dtype != np.float32:
        _fail(
            env_id,
            "spaces",
            f"step {t}: reward must be float32 ({n},), got {reward.dtype} {reward.shape}",
        )
    if not np.isfinite(reward).all():
        _fail(env_id, "spaces", f"step {t}: non-finite reward {reward}")
    flags = [("terminated", term), ("truncated", trunc)]
    success = None if out.success is None else _to_numpy(out.success)
    flags += [("success", success)] if success is not None else []
    for name, flag in flags:
        if flag.shape != (n,) or flag.dtype != np.bool_:
            _fail(
                env_id,
                "spaces",
                f"step {t}: {name} must be bool ({n},), got {flag.dtype} {flag.shape}",
            )
    _check_obs(env_id, env, out.obs, f"step {t}")
    return StepBatch(_to_numpy(out.obs), reward, term, trunc, success)


def _digest(h: Any, obs: Any, out: StepBatch | None = None) -> None:
    obs = _to_numpy(obs)
    parts = (
        [obs[k] for k in sorted(obs)]
        if isinstance(obs, dict)
        else (list(obs) if isinstance(obs, tuple) else [obs])
    )
    if out is not None:
        parts += [out.reward, out.terminated, out.truncated]
    for p in parts:
        h.update(np.ascontiguousarray(p).tobytes())


def rollout_digest(env: BatchEnv, steps: int, seed: int) -> str:
    """SHA-1 of a random-action trajectory: equal digests mean identical trajectories."""
    rng = np.random.default_rng(seed)
    h = hashlib.sha1()
    _digest(h, env.reset())
    for _ in range(steps):
        out = env.step(random_actions(env.single_action_space, env.num_envs, rng))
        _digest(
            h,
            out.obs,
            StepBatch(
                out.obs, _to_numpy(out.reward), _to_numpy(out.terminated), _to_numpy(out.truncated)
            ),
        )
    return h.hexdigest()


def _spawned_digest(
    env_id: str, num_envs: int, seed: int, steps: int, env_kwargs: dict[str, Any]
) -> str:
    from mtrl.plugins import make_env

    env = make_env(env_id, num_envs=num_envs, seed=seed, **env_kwargs)
    try:
        return rollout_digest(env, steps, seed)
    finally:
        env.close()


def check_env(
    env: str | EnvSpec,
    *,
    num_envs: int = 3,
    seed: int = 123,
    steps: int = 300,
    env_kwargs: dict[str, Any] | None = None,
    require_episode_end: bool = True,
    spawn: bool = True,
    determinism_steps: int = 50,
    spawn_timeout_s: float = 120.0,
) -> ConformanceReport:
    """Run the conformance suite on one env (an id from the registry, or an EnvSpec).

    ``env_kwargs`` are passed to ``make`` (e.g. a short time limit so episodes end within
    ``steps``). Returns what was checked; raises :class:`ConformanceError` on the first failure.
    """
    from mtrl.plugins import get_plugins

    registry = get_plugins().envs
    spec = env if isinstance(env, EnvSpec) else registry.get(env)
    kwargs = dict(env_kwargs or {})
    report = ConformanceReport(spec.id)
    env_id = spec.id

    batch = spec.build(num_envs=num_envs, seed=seed, **kwargs)
    try:
        declared_obs, declared_act = spec._observation_space, spec._action_space
        if declared_obs is not None and declared_obs != batch.single_observation_space:
            _fail(
                env_id,
                "build",
                f"declared observation space {declared_obs} != built "
                f"{batch.single_observation_space}",
            )
        if declared_act is not None and declared_act != batch.single_action_space:
            _fail(
                env_id,
                "build",
                f"declared action space {declared_act} != built {batch.single_action_space}",
            )
        report.checks.append("build")
        _check_trainable(env_id, batch)
        report.checks.append("trainable")

        rng = np.random.default_rng(seed)
        _check_obs(env_id, batch, batch.reset(), "reset")
        prev_done = np.zeros(num_envs, dtype=bool)
        for t in range(steps):
            actions = random_actions(batch.single_action_space, num_envs, rng)
            out = _check_step(env_id, batch, batch.step(actions), t)
            if prev_done.any():
                r = out.reward[prev_done]
                if (
                    (r != 0).any()
                    or out.terminated[prev_done].any()
                    or out.truncated[prev_done].any()
                ):
                    _fail(
                        env_id,
                        "auto-reset",
                        f"step {t}: the step after an episode end must "
                        "be a reset step (reward 0, flags false), got reward "
                        f"{out.reward[prev_done]}, terminated {out.terminated[prev_done]}, "
                        f"truncated {out.truncated[prev_done]}",
                    )
            done = out.terminated | out.truncated
            report.episode_ends += int(done.sum())
            prev_done = done
            report.steps += 1
        report.checks.append("spaces")
        if report.episode_ends:
            report.checks.append("auto-reset")
        elif require_episode_end:
            _fail(
                env_id,
                "auto-reset",
                f"no episode ended in {steps} steps of {num_envs} "
                "copies; pass env_kwargs that shorten episodes or raise steps",
            )
        else:
            report.skipped["auto-reset"] = "no episode ended"
    finally:
        batch.close()
    batch.close()
    report.checks.append("close")

    digests = []
    for _ in range(2):
        e = spec.build(num_envs=num_envs, seed=seed, **kwargs)
        try:
            digests.append(rollout_digest(e, determinism_steps, seed))
        finally:
            e.close()
    if digests[0] != digests[1]:
        _fail(
            env_id, "seeding", "two envs built with the same seed and fed the same actions diverged"
        )
    report.checks.append("seeding")

    if not spawn:
        report.skipped["spawn"] = "disabled by caller"
    elif (
        env_id not in registry
        or registry.get(env_id).make is not spec.make
        or spec.plugin not in _entry_point_names()
    ):
        report.skipped["spawn"] = "env registered in-process only; workers cannot see it"
    else:
        ctx = mp.get_context("spawn")
        with ctx.Pool(1) as pool:
            pending = pool.apply_async(
                _spawned_digest, (env_id, num_envs, seed, determinism_steps, kwargs)
            )
            try:
                child = pending.get(timeout=spawn_timeout_s)
            except mp.TimeoutError:
                _fail(
                    env_id,
                    "spawn",
                    f"a spawned worker did not finish within "
                    f"{spawn_timeout_s:g} s (it hung or died while building the env)",
                )
        if child != digests[0]:
            _fail(
                env_id,
                "spawn",
                "a spawned worker building the env by id produced a "
                "different trajectory than the parent",
            )
        report.checks.append("spawn")
    return report


def _entry_point_names() -> set[str]:
    from mtrl.plugins import get_plugins

    return {
        name
        for name, info in get_plugins().infos.items()
        if info.status == "ok" and (info.builtin or info.package)
    }
