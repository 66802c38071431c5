"""Pre-flight memory check: refuse a run that cannot fit before it allocates anything large.

A config such as ``num_envs: 100000000`` would otherwise pass ``mtrl validate`` and let
``mtrl train`` grow for a minute until an allocator fails with a traceback. :func:`check_memory`
runs before envs, unroll slots, model and learner exist (``mtrl train``) and in
``mtrl validate``: it estimates the run's memory (:mod:`mtrl.train.memory_estimate`) and compares it
with what the host, ``/dev/shm`` and a CUDA device have available, raising
:class:`MemoryCheckError` (exit 2, one line per memory) that names the config fields
responsible, the estimate and what is available.

Without the tasks' specs (plain ``mtrl validate``) every task gets the smallest sizes any space
could have (:func:`bound_sizes`), so only a config that cannot fit whatever its envs are is
refused. With them, the sizes come from the real spaces (:func:`task_sizes`): nothing of
``num_envs`` size is built, only one env copy for a task whose env_kwargs may change its spaces.
The estimate ignores an env copy's own state beyond its observation buffers (Python objects,
simulator state) and memory other programs take after the check.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from mtrl.config import ExperimentConfig
from mtrl.errors import UserError
from mtrl.train.memory_estimate import (
    Blame,
    Part,
    ReplayNeed,
    TaskSizes,
    action_bytes,
    estimate,
    problems,
    space_bytes,
    torso_row_bytes,
)

if TYPE_CHECKING:
    from mtrl.plugins.algorithm_registrar import AlgorithmRegistry

SKIP_ENV = "MTRL_NO_MEMORY_CHECK"
"""Set to 1 to skip the check (when the estimate is wrong for your envs)."""


_SMALLEST_OBS = spaces.Box(0, 1, (1,), np.uint8)
_SMALLEST_ACTION = spaces.Box(-1, 1, (1,), np.float32)
"""The spaces of :func:`bound_sizes`: one byte of observation, one float32 of action."""


class MemoryCheckError(UserError):
    """The run's estimated memory exceeds what this machine (or its device) has available."""


def replay_need(
    cfg: ExperimentConfig, algorithms: AlgorithmRegistry | None = None
) -> ReplayNeed | None:
    """What the replay of ``cfg``'s rule takes, from the rule's registration (its
    ``replay_bytes`` and default ``replay_capacity``) in ``algorithms`` (default: the loaded
    plugins'), blaming ``replay.capacity``; None for a rule without a replay, or one no plugin
    offers (the trainer names it)."""
    if algorithms is None:
        from mtrl.plugins import get_plugins

        algorithms = get_plugins().algorithms
    name = cfg.learner.algorithm
    if name not in algorithms:
        return None
    spec = algorithms.get(name)
    if spec.replay_bytes is None:
        return None
    size = spec.replay_bytes
    settings = spec.resolve_settings(cfg.learner)
    return ReplayNeed(
        nbytes=lambda obs, act: int(size(cfg.learner, settings, obs, act)),
        blame=Blame(("replay", "capacity"), spec.capacity(cfg.learner)),
    )


def _replay_bytes(replay: ReplayNeed | None, obs: gym.Space, act: gym.Space) -> int:
    return 0 if replay is None else replay.nbytes(obs, act)


def bound_sizes(cfg: ExperimentConfig, replay: ReplayNeed | None = None) -> list[TaskSizes]:
    """The smallest sizes any space could have: a one-byte observation, a float32 action, no
    encoder or head parameters, the torso's activations only (and a ``replay`` of such)."""
    mc = cfg.learner.model
    experts = mc.torso_mixture.experts if mc.torso_mixture is not None else 1
    row = experts * torso_row_bytes(mc.encoder_dim, mc.torso)
    smallest = _replay_bytes(replay, _SMALLEST_OBS, _SMALLEST_ACTION)
    return [TaskSizes(1, 4, 0, row, smallest) for _ in cfg.tasks]


def task_sizes(
    cfg: ExperimentConfig,
    task_spaces: Sequence[tuple[gym.Space, gym.Space]],
    replay: ReplayNeed | None = None,
) -> list[TaskSizes]:
    """Each task's sizes from its (observation, action) spaces: parameters counted on the
    ``meta`` device (nothing allocated), activations measured on a few sampled rows, and the
    rule's ``replay`` (:func:`replay_need`; None: no replay). A task whose model cannot be
    built keeps the lower bound (the trainer then says why)."""
    from mtrl.learner.model import MultiTaskModel, TaskSpaces

    mc = cfg.learner.model
    experts = mc.torso_mixture.experts if mc.torso_mixture is not None else 1
    low = float(experts * torso_row_bytes(mc.encoder_dim, mc.torso))
    smallest = _replay_bytes(replay, _SMALLEST_OBS, _SMALLEST_ACTION)
    out = []
    for obs_space, act_space in task_spaces:
        ts = [TaskSpaces(obs_space, act_space)]
        try:
            obs, act = space_bytes(obs_space), action_bytes(act_space)
            replay_size = _replay_bytes(replay, obs_space, act_space)
            with torch.device("meta"):
                params = sum(p.numel() for p in MultiTaskModel(ts, mc).task_parameters(0))
        except Exception:  # an unsupported space: the trainer's own check names the part
            out.append(TaskSizes(1, 4, 0, low, smallest))
            continue
        out.append(TaskSizes(obs, act, params, max(low, _row_bytes(ts, mc)), replay_size))
    return out


def _row_bytes(ts: list[Any], mc: Any) -> float:
    """Bytes autograd keeps per observation row in a forward with the loss's terms: the slope
    of the saved tensors' storage between batches of 2 and 6 rows (the parameters, saved in
    both, cancel)."""
    from mtrl.learner.model import MultiTaskModel, obs_to_tensor

    def saved(model: Any, n: int) -> int:
        obs = obs_to_tensor(_sample(ts[0].observation_space, n))
        seen: dict[int, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            storage = t.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            dist, value = model(0, obs)
            _ = dist.log_prob(dist.sample()).sum() + dist.entropy().sum() + value.sum()
        return sum(seen.values())

    try:
        with torch.random.fork_rng(devices=[]):  # a seeded run's own init stays as it was
            model = MultiTaskModel(ts, mc)
            return max((saved(model, 6) - saved(model, 2)) / 4, 0.0)
    except Exception:  # the model fails on samples: the trainer's own check reports it
        return 0.0


def _sample(space: gym.Space, n: int) -> Any:
    """``n`` samples of ``space`` as one batch; an ``action_mask`` allows every action."""
    from mtrl.learner.encoders import ACTION_MASK_KEY

    if isinstance(space, spaces.Dict):
        return {
            k: np.ones((n, *s.shape), s.dtype) if k == ACTION_MASK_KEY else _sample(s, n)
            for k, s in space.spaces.items()
        }
    if isinstance(space, spaces.Tuple):
        return tuple(_sample(s, n) for s in space.spaces)
    own = copy.deepcopy(space)  # sampling must not move the caller's space's generator
    own.seed(0)
    return np.stack([np.asarray(own.sample(), dtype=space.dtype) for _ in range(n)])


def spaces_of(cfg: ExperimentConfig, specs: Sequence[Any]) -> list[tuple[gym.Space, gym.Space]]:
    """Each task's spaces from its spec, or from the smallest env when its kwargs may change them
    (:func:`mtrl.train.task_envs.probe_spaces`)."""
    from mtrl.train.task_envs import probe_spaces

    return [probe_spaces(spec, cfg, i) for i, spec in enumerate(specs)]


def host_available() -> int | None:
    """Bytes this process may still allocate: ``MemAvailable`` (Linux), lowered to the cgroup's
    limit less its usage (page cache excluded) when there is one; None when unknown."""
    try:
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        info = dict(line.split(":", 1) for line in meminfo if ":" in line)
        available = int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None
    cg = Path("/sys/fs/cgroup")
    try:
        limit = (cg / "memory.max").read_text().strip()
        if limit != "max":
            stat = dict(line.split() for line in (cg / "memory.stat").read_text().splitlines())
            used = int((cg / "memory.current").read_text()) - int(stat.get("file", 0))
            available = min(available, int(limit) - used)
    except (OSError, ValueError):
        pass
    return available


def shm_available() -> int | None:
    """Free bytes of ``/dev/shm``, where unroll slots live (:mod:`mtrl.actors.shm`); None when
    it is missing or not writable (they then live in the temp dir)."""
    if not (os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK)):
        return None
    st = os.statvfs("/dev/shm")
    return st.f_bavail * st.f_frsize


def device_available(device: torch.device | None) -> int | None:
    """Free bytes of a CUDA device; None for the CPU (host memory) and devices we cannot ask."""
    if device is None or device.type != "cuda":
        return None
    return int(torch.cuda.mem_get_info(device)[0])


def check_memory(
    cfg: ExperimentConfig,
    specs: Sequence[Any] | None = None,
    device: torch.device | None = None,
    *,
    source: str | Path | None = None,
    algorithms: AlgorithmRegistry | None = None,
) -> list[Part]:
    """Raise :class:`MemoryCheckError` if a run of ``cfg`` would not fit; returns the parts.

    First with :func:`bound_sizes` (nothing built), then, given the tasks' ``specs``, with
    their spaces. ``device``: the learner's (by default the config's, resolved). ``source``:
    the config file, to start each line with its ``file:line``. ``algorithms``: the learning
    rules, which say what their replays take (default: the loaded plugins'). Replicas of a
    torchrun job on one node share the host's memory. Skipped when ``MTRL_NO_MEMORY_CHECK=1``.
    """
    if os.environ.get(SKIP_ENV, "") not in ("", "0"):
        return []
    if device is None:
        device = _config_device(cfg)
    on_device = device is None or device.type != "cpu"  # None: a device not here
    replicas = max(int(os.environ.get("LOCAL_WORLD_SIZE") or 1), 1)
    host = host_available()
    available = (
        None if host is None else host // replicas,
        device_available(device),
        shm_available() if cfg.actors.mode != "serial" else None,
        str(device) if device is not None else cfg.learner.device,
    )
    replay = replay_need(cfg, algorithms)
    parts = estimate(cfg, bound_sizes(cfg, replay), on_device, replay)
    _raise(problems(parts, *available), source)
    if specs is not None:
        parts = estimate(cfg, task_sizes(cfg, spaces_of(cfg, specs), replay), on_device, replay)
        _raise(problems(parts, *available), source)
    return parts


def _config_device(cfg: ExperimentConfig) -> torch.device | None:
    from mtrl.learner.device import resolve_device

    try:
        return resolve_device(cfg.learner.device)
    except UserError:  # not on this machine (a GPU config validated on a laptop)
        return None


def _raise(found: list[tuple[Blame | None, str]], source: str | Path | None) -> None:
    if not found:
        return
    from mtrl.config.lines import config_location

    lines = []
    for blame, msg in found:
        if source is not None:
            where = config_location(source, blame.loc) if blame is not None else str(source)
            msg = f"{where}: {msg}"
        lines.append(f"{msg} (or set {SKIP_ENV}=1 to try anyway)")
    raise MemoryCheckError("\n".join(lines), problems=lines)
