"""How much memory a run of a config needs, and whether that fits: pure arithmetic.

:func:`estimate` lists every large allocation of a run (:class:`Part`): each task's unroll
slots (shared memory) and envs (their observation and action buffers), the actor processes, the
model with its gradients, optimiser state and inference copy, one learner update (activations
kept for backward, loss terms, on a device the batch's copy), the inference batch and, for a
replay-based rule, each task's replay (its size is the rule's to say: :class:`ReplayNeed`,
from the rule's registration). Each part
says where it lives (host or the learner's device) and which config fields scale it, so
:func:`problems` can name the culprit when a memory overflows :data:`HEADROOM` of what is
available. The inputs per task (:class:`TaskSizes`) come from the spaces; gathering them, and
the available memory, is :mod:`mtrl.train.preflight`'s job.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from mtrl.actors.unroll import raw_action_layout
from mtrl.config import ExperimentConfig

HEADROOM = 0.85
"""Fraction of the available memory a run may plan to use; the rest is left for what the
estimate cannot see (allocator slack, the page cache, other programs)."""
STEP_BYTES = 4 + 4 + 3
"""Per step and env copy, besides observation and action: behaviour log-prob and reward
(float32), terminated, truncated and valid (bool); see :func:`mtrl.actors.unroll.unroll_fields`."""
SERIAL_BUFFERS = 2
"""Unroll buffers a serial actor has in use: the one it fills and the one the learner reads
(each task steps once a round; see :func:`serial_buffers` for a policy with data shares)."""
ENV_OBS_COPIES = 2
"""Observation buffers a batch env keeps per copy (its own and the one it returns)."""
ACTOR_PROCESS_BYTES = 256 * 2**20
"""Private memory of an actor process besides its envs' buffers: Python, torch and the env
library (230-300 MB measured for each actor of the quickstart)."""
BACKWARD_FACTOR = 2
"""Peak of a learner update over the activations autograd keeps: their gradients in backward."""
LOSS_BYTES_PER_STEP = 64
"""V-trace and loss terms per step and env copy (about 16 float32 ``[T, N]`` arrays)."""
OPTIMIZER_STATES = {"adam": 2, "rmsprop": 1}
"""float32 tensors the optimiser keeps per parameter."""


@dataclass(frozen=True)
class Blame:
    """A config field that scales a part of the estimate, with its value."""

    loc: tuple[str | int, ...]
    value: Any

    @property
    def field(self) -> str:
        """The field as a config path: ``tasks[0].num_envs``."""
        return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in self.loc).lstrip(".")

    def __str__(self) -> str:
        return f"{self.field} = {self.value}"


@dataclass(frozen=True)
class TaskSizes:
    """What the estimate needs to know of one task's spaces."""

    obs_bytes: int
    """One observation of one env copy, as the unroll stores it."""
    action_bytes: int
    """One raw action of one env copy."""
    params: int
    """Parameters of the task's encoder and policy head."""
    row_bytes: float
    """Learner activations autograd keeps per observation row (encoder, torso, heads)."""
    replay_bytes: int = 0
    """The task's replay (:attr:`ReplayNeed.nbytes`; 0 for a rule without one)."""


@dataclass(frozen=True)
class ReplayNeed:
    """What a replay-based rule's replays take: the bytes of one task's replay from its
    (observation, action) spaces, and the config field that scales them (``replay.capacity``,
    with the env steps per task it stands for: what a refusal tells the user to lower)."""

    nbytes: Callable[[gym.Space, gym.Space], int]
    blame: Blame


@dataclass(frozen=True)
class Part:
    """One allocation of a run: what it is, its size, where it lives, which fields scale it
    (the first is the one to change)."""

    what: str
    nbytes: int
    on_device: bool
    blame: tuple[Blame, ...]
    shm: bool = False
    """Lives in shared memory (``/dev/shm``, a tmpfs with its own size limit)."""


def space_bytes(space: gym.Space) -> int:
    """Bytes of one sample of ``space`` as an unroll stores it (Dict and Tuple: their parts)."""
    if isinstance(space, spaces.Dict):
        return sum(space_bytes(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return sum(space_bytes(s) for s in space.spaces)
    shape = () if isinstance(space, spaces.Discrete) else tuple(space.shape or ())
    return math.prod(shape) * np.dtype(space.dtype).itemsize


def action_bytes(space: gym.Space) -> int:
    """Bytes of one raw policy action for ``space`` (what the unroll stores)."""
    shape, dtype = raw_action_layout(space)
    return math.prod(shape) * dtype.itemsize


def unroll_bytes(T: int, N: int, obs_bytes: int, act_bytes: int) -> int:
    """Bytes of one unroll of ``T`` steps of ``N`` env copies: ``T + 1`` observation rows, ``T``
    rows of actions and per-step fields, and one int64 version per step."""
    return (T + 1) * N * obs_bytes + T * N * (act_bytes + STEP_BYTES) + 8 * T


def env_bytes(N: int, obs_bytes: int, act_bytes: int) -> int:
    """The observation and action buffers of a batch env of ``N`` copies (a lower bound: an
    env copy's own state is not counted)."""
    return N * (ENV_OBS_COPIES * obs_bytes + act_bytes)


def mlp_params(in_dim: int, widths: Sequence[int]) -> int:
    """Weights and biases of a stack of linear layers."""
    return sum(a * b + b for a, b in itertools.pairwise([in_dim, *widths]))


def torso_params(mc: Any) -> int:
    """Parameters of a model config's shared torso: ``experts`` MLPs of the ``torso`` widths
    with a ``torso_mixture`` (its task embedding and gate not counted), else one; a residual
    torso's stem and blocks, each ``Linear`` of them followed by a LayerNorm (``2w``)."""
    if mc.torso_block == "residual":
        w = mc.torso[0]
        layer = mlp_params(w, [w]) + 2 * w
        return mlp_params(mc.encoder_dim, [w]) + 2 * w + 2 * len(mc.torso) * layer
    experts = mc.torso_mixture.experts if mc.torso_mixture is not None else 1
    return experts * mlp_params(mc.encoder_dim, mc.torso)


def torso_row_bytes(encoder_dim: int, torso: Sequence[int]) -> int:
    """float32 activations the torso keeps per row for backward: its input and each layer's
    output (a lower bound of :attr:`TaskSizes.row_bytes`)."""
    return 4 * (encoder_dim + sum(torso))


def core_sizes(mc: Any) -> tuple[int, int]:
    """(parameters of a *shared* recurrent core, state floats per env copy) of a model config:
    LSTM ``4H(I + H + 2)``, GRU ``3H(I + H + 2)`` parameters; per-task cores are counted in
    each task's :attr:`TaskSizes.params` instead. (0, 0) without a core."""
    core = mc.core
    if core is None:
        return 0, 0
    gates, h = (4, 2) if core.kind == "lstm" else (3, 1)
    width = mc.torso[-1] if mc.torso else mc.encoder_dim
    params = gates * core.hidden * (width + core.hidden + 2) if core.shared else 0
    return params, h * core.hidden


def model_state_bytes(params: int, optimizer: str, inference_copy: bool) -> int:
    """float32 weights, gradients, optimiser state and (parallel actors) the inference copy."""
    copies = 2 + OPTIMIZER_STATES.get(optimizer, 2) + int(inference_copy)
    return 4 * params * copies


def actor_counts(cfg: ExperimentConfig, per_actor: Sequence[int]) -> list[int]:
    """Actors per task the scheduler may run: one per task in serial mode; the split by weight
    with ``fixed``; with an adaptive policy the floor everywhere and every spare actor on the
    task whose actor costs most (``per_actor``); 0 for Anakin tasks."""
    from mtrl.scheduler.policies import apportion
    from mtrl.scheduler.rebalancer import budget_for

    idx = [i for i, t in enumerate(cfg.tasks) if not t.anakin]
    if not idx or cfg.actors.mode == "serial":
        return [int(i in idx) for i in range(len(cfg.tasks))]
    budget = budget_for(cfg, len(idx))
    if cfg.scheduler.policy == "fixed":
        weights = [cfg.tasks[i].weight for i in idx]
        alloc = [int(a) for a in apportion(weights, budget.slots, budget.min_per_task)]
    else:
        alloc = [budget.min_per_task] * len(idx)
        alloc[max(range(len(idx)), key=lambda k: per_actor[idx[k]])] += budget.slots - sum(alloc)
    counts = [0] * len(cfg.tasks)
    for k, i in enumerate(idx):
        counts[i] = alloc[k]
    return counts


def serial_buffers(cfg: ExperimentConfig) -> int:
    """Unroll buffers a serial actor may have in use. Under a policy that sets data shares the
    serial pool hands out turns by share (:mod:`mtrl.actors.turns`), and one task can take
    every turn of a round (as many as there are tasks) while the learner reads the last."""
    if cfg.scheduler.policy == "fixed":
        return SERIAL_BUFFERS
    return max(SERIAL_BUFFERS, len(cfg.tasks) + 1)


def estimate(
    cfg: ExperimentConfig,
    sizes: Sequence[TaskSizes],
    on_device: bool,
    replay: ReplayNeed | None = None,
) -> list[Part]:
    """Every large allocation of a run of ``cfg`` whose tasks have ``sizes``; ``on_device``:
    the learner's memory is not the host's (CUDA, XLA, MPS); ``replay``: the rule's replay,
    whose field the replay parts blame (the sizes hold their bytes)."""
    lc, mode = cfg.learner, cfg.actors.mode
    T, tasks = lc.unroll_length, cfg.tasks
    slots = serial_buffers(cfg) if mode == "serial" else cfg.actors.slots_per_actor
    core_params, state = core_sizes(lc.model)
    unrolls = [
        unroll_bytes(T, t.num_envs, s.obs_bytes, s.action_bytes) + 4 * state * t.num_envs
        for t, s in _ts(cfg, sizes)
    ]
    envs = [env_bytes(t.num_envs, s.obs_bytes, s.action_bytes) for t, s in _ts(cfg, sizes)]
    actors = actor_counts(cfg, [slots * u + e for u, e in zip(unrolls, envs, strict=True)])
    length = Blame(("learner", "unroll_length"), T)
    num_actors = Blame(("scheduler", "num_actors"), cfg.scheduler.num_actors)
    parts: list[Part] = []
    for i, task in enumerate(tasks):
        n = Blame(("tasks", i, "num_envs"), task.num_envs)
        if task.anakin:
            parts.append(Part(f"tasks[{i}] Anakin envs", unrolls[i] + envs[i], on_device, (n,)))
            continue
        held = (Blame(("actors", "slots_per_actor"), slots),) if mode != "serial" else ()
        many = (num_actors,) if actors[i] > 1 else ()
        slot_bytes = actors[i] * slots * unrolls[i]
        blame = (n, length, *held, *many)
        parts.append(Part(f"tasks[{i}] unroll slots", slot_bytes, False, blame, mode != "serial"))
        parts.append(Part(f"tasks[{i}] envs", actors[i] * envs[i], False, (n, *many)))
    replay_blame = (replay.blame,) if replay is not None else ()
    for i, s in enumerate(sizes):
        if s.replay_bytes:
            parts.append(Part(f"tasks[{i}] replay", s.replay_bytes, False, replay_blame))
    if mode == "process":
        parts.append(
            Part("actor processes", sum(actors) * ACTOR_PROCESS_BYTES, False, (num_actors,))
        )
    mc = lc.model
    hidden = mc.core.hidden if mc.core else mc.torso[-1] if mc.torso else mc.encoder_dim
    params = sum(s.params for s in sizes) + torso_params(mc) + core_params
    params += len(tasks) * (hidden + 1)  # the stacked value head
    model = model_state_bytes(params, lc.optimizer, mode != "serial")
    widths = (Blame(("learner", "model", "torso"), mc.torso),)
    widths += (Blame(("learner", "model", "encoder_dim"), mc.encoder_dim),)
    parts.append(Part("model and optimiser state", model, on_device, widths))
    parts.append(_batch_part(cfg, sizes, on_device))
    # The server runs one forward per task over every waiting actor's envs.
    rows = [0 if t.anakin else max(actors[i], 1) * t.num_envs for i, t in enumerate(tasks)]
    infer = [int(r * (2 * s.obs_bytes + s.row_bytes)) for r, s in zip(rows, sizes, strict=True)]
    k = max(range(len(tasks)), key=infer.__getitem__)
    n_k = Blame(("tasks", k, "num_envs"), tasks[k].num_envs)
    parts.append(Part("inference batch", infer[k], on_device, (n_k,)))
    return parts


def _ts(cfg: ExperimentConfig, sizes: Sequence[TaskSizes]) -> Any:
    return zip(cfg.tasks, sizes, strict=True)


def _batch_part(cfg: ExperimentConfig, sizes: Sequence[TaskSizes], on_device: bool) -> Part:
    """One learner update: at least ``batch_size`` env columns of whole unrolls of one task
    (the costliest), their activations through backward, the loss terms and, on a device, the
    batch's copy there."""
    T, B = cfg.learner.unroll_length, cfg.learner.batch_size
    best, best_i = -1, 0
    for i, (task, s) in enumerate(_ts(cfg, sizes)):
        cols = -(-B // task.num_envs) * task.num_envs
        nbytes = (
            int((T + 1) * cols * s.row_bytes * BACKWARD_FACTOR) + T * cols * LOSS_BYTES_PER_STEP
        )
        if on_device:
            nbytes += unroll_bytes(T, cols, s.obs_bytes, s.action_bytes)
        if nbytes > best:
            best, best_i = nbytes, i
    n = cfg.tasks[best_i].num_envs  # one unroll of more columns than batch_size: it decides
    first = (
        Blame(("tasks", best_i, "num_envs"), n) if n > B else Blame(("learner", "batch_size"), B)
    )
    return Part("learner batch", best, on_device, (first, Blame(("learner", "unroll_length"), T)))


def gb(nbytes: float) -> str:
    """A size for people: ``12.3 GB``, ``640 MB``, ``1,340 GB`` (decimal units)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"
    return f"{nbytes:.0f} B"


def describe(parts: Sequence[Part], where: str, available: int) -> str:
    """One line: the fields behind the largest part, the total, the biggest parts, what is
    available and the field to lower."""
    total = sum(p.nbytes for p in parts)
    top = sorted(parts, key=lambda p: p.nbytes, reverse=True)[:3]
    top = [p for k, p in enumerate(top) if k == 0 or p.nbytes >= 0.05 * total]
    culprit = top[0].blame if top else ()
    fields = ", ".join(str(b) for b in culprit)
    biggest = ", ".join(f"{p.what} {gb(p.nbytes)}" for p in top)
    fix = f"; lower {culprit[0].field}" if culprit else ""
    return (
        f"{fields}: the run needs about {gb(total)} of {where} ({biggest}) but {gb(available)} "
        f"is available and mtrl plans to use at most {HEADROOM:.0%} of it "
        f"({gb(HEADROOM * available)}){fix}"
    )


def problems(
    parts: Sequence[Part],
    host: int | None,
    device: int | None = None,
    shm: int | None = None,
    device_name: str = "device",
) -> list[tuple[Blame | None, str]]:
    """(field to point at, one-line message) for each memory the parts overflow beyond
    :data:`HEADROOM` of what is available; an available of None is unknown (not checked)."""
    checks = [
        ([p for p in parts if not p.on_device], host, "host memory"),
        ([p for p in parts if p.on_device], device, f"{device_name} memory"),
        ([p for p in parts if p.shm], shm, "shared memory (/dev/shm) for the unroll slots"),
    ]
    out: list[tuple[Blame | None, str]] = []
    host_over = False
    for k, (group, available, where) in enumerate(checks):
        if available is None or sum(p.nbytes for p in group) <= HEADROOM * available:
            continue
        if k == 2 and host_over:
            continue  # the slots are in the host's line already
        host_over = host_over or k == 0
        top = max(group, key=lambda p: p.nbytes)
        out.append((top.blame[0] if top.blame else None, describe(group, where, available)))
    return out
