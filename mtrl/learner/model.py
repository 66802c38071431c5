"""The multi-task actor-critic: per-task encoders → shared torso → [core] → per-task heads.

Task ``i`` owns an encoder chosen from its observation space (:mod:`mtrl.learner.encoders`),
a policy head chosen from its action space (:mod:`mtrl.learner.distributions`) and row ``i``
of the stacked value head (``value_weight [K, H]``, ``value_bias [K]``), whose output is the
PopArt-*normalised* value (Hessel et al. 2019); :func:`mtrl.learner.popart.preserve_outputs`
rescales those two parameters in place of a per-task ``nn.Linear``. The torso is shared.

Observations go in as the env produced them, converted with :func:`obs_to_tensor`
(``torch.as_tensor``, no casting: ``uint8`` frames stay ``uint8`` until they reach the
device); a Dict observation is a ``dict`` of tensors with the same leading batch shape, whose
``action_mask`` entry (1 = legal), if the space has one, masks the policy; a Tuple observation
is a ``dict`` keyed ``"0"``, ``"1"``, ... (:func:`obs_to_tensor` converts a tuple). Which
spaces a model can be built for is checked up front by :mod:`mtrl.learner.trainable`.

With ``learner.model.core`` set, a recurrent core (:mod:`mtrl.learner.recurrent`; one shared,
or one per task) sits between the torso and the heads, and the model has two faces: the step
API for actors, :meth:`MultiTaskModel.step` (one row of observations and the copies' states in,
features and the next states out), and the sequence API for the learner,
:meth:`MultiTaskModel.unroll` / :meth:`MultiTaskModel.run_cores` (an unroll's rows from its
initial state, reset where episodes start). Without a core the state is an empty ``[N, 0]``
tensor that :meth:`MultiTaskModel.step` passes through, and no parameter is added, so
feed-forward checkpoints keep their names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import torch
from gymnasium import spaces
from torch import nn

from mtrl.config.learner import ModelConfig
from mtrl.learner import stacked
from mtrl.learner.device import to_device
from mtrl.learner.distributions import GaussianHead, PolicyDist, make_policy_head
from mtrl.learner.encoders import ACTION_MASK_KEY, make_encoder
from mtrl.learner.recurrent import RecurrentCore, state_size
from mtrl.learner.torsos import make_torso, shared_torso_parameters

__all__ = ["MultiTaskModel", "TaskSpaces", "obs_to_tensor"]

Obs = torch.Tensor | dict[str, Any]


@dataclass(frozen=True)
class TaskSpaces:
    """The spaces of one task, for ONE env copy (no batch dimension)."""

    observation_space: gym.Space
    action_space: gym.Space


def obs_to_tensor(obs: Any, device: torch.device | str | None = None) -> Obs:
    """Batched numpy observations (array, dict or tuple of arrays) → tensors on ``device``.

    Keeps the dtype (``torch.as_tensor``), so casting and scaling happen on the device; to a
    GPU through pinned memory (:func:`~mtrl.learner.device.to_device`). A tuple (a Tuple
    observation) becomes a dict keyed ``"0"``, ``"1"``, ..., the form unrolls carry.
    """
    if isinstance(obs, Mapping):
        return {k: obs_to_tensor(v, device) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return {str(i): obs_to_tensor(v, device) for i, v in enumerate(obs)}
    return to_device(obs, device)


class MultiTaskModel(nn.Module):
    """One network for K heterogeneous tasks; ``forward(task, obs)`` runs task ``task``'s path.

    Shapes: ``obs`` is ``[*B, *obs_shape]`` (or a dict of such) for any leading batch shape
    ``[*B]``, e.g. ``[N]`` at inference or ``[T + 1, N]`` in the learner. ``forward`` returns the
    policy with batch shape ``[*B]`` and the normalised value ``[*B]``. A recurrent model's
    ``forward`` takes one row ``[N]`` and a state (see :meth:`forward`).
    """

    def __init__(self, tasks: Sequence[TaskSpaces], cfg: ModelConfig) -> None:
        super().__init__()
        if len(tasks) == 0:
            raise ValueError("MultiTaskModel needs at least one task")
        self.num_tasks = len(tasks)
        self.spaces = tuple(tasks)
        """The spaces each task was built for (what a rule that builds more for the tasks —
        critics, replay storage — reads)."""
        torso_dim = cfg.torso[-1] if cfg.torso else cfg.encoder_dim
        self.hidden_dim = cfg.core.hidden if cfg.core is not None else torso_dim
        encoders, heads, masked = [], [], []
        for i, task in enumerate(tasks):
            what = f"task {i}"
            encoders.append(make_encoder(task.observation_space, cfg, f"{what} encoder"))
            head = make_policy_head(
                task.action_space,
                self.hidden_dim,
                f"{what} policy head",
                cfg.squashed_entropy,
                cfg.log_std_step_scale,
            )
            has_mask = (
                isinstance(task.observation_space, spaces.Dict)
                and ACTION_MASK_KEY in task.observation_space.spaces
            )
            if has_mask and not head.supports_mask:
                raise ValueError(
                    f"{what}: the observation has an {ACTION_MASK_KEY!r} but the action space "
                    f"{task.action_space!r} is not discrete; rename the key or drop it"
                )
            heads.append(head)
            masked.append(has_mask)
        self.encoders = nn.ModuleList(encoders)
        self.torso = make_torso(cfg, len(tasks))
        self.conditioned = cfg.torso_mixture is not None
        """Whether the torso takes each row's task (:mod:`mtrl.learner.torsos`)."""
        self.policy_heads = nn.ModuleList(heads)
        self._masked = tuple(masked)
        # Fixed at construction: a task-sharded replica replaces the heads it does not own.
        self.gaussian = tuple(isinstance(h, GaussianHead) for h in heads)
        """Per task: whether its policy is a Gaussian (``Box`` actions)."""
        self.max_entropy = tuple(float(getattr(h, "max_entropy", math.nan)) for h in heads)
        """Per task: the entropy of its uniform policy; NaN for a Gaussian (no maximum)."""
        self.squashed = tuple(bool(getattr(h, "squashed", False)) for h in heads)
        """Per task: whether its policy is a Gaussian whose env actions are tanh-squashed into
        the Box's bounds with the squashed action's entropy as bonus (``squashed_entropy``)."""
        self.value_weight = nn.Parameter(torch.empty(self.num_tasks, self.hidden_dim))
        self.value_bias = nn.Parameter(torch.zeros(self.num_tasks))
        with torch.no_grad():
            for row in self.value_weight:  # each row as its own Linear(H, 1), gain 1
                nn.init.orthogonal_(row.view(1, -1), gain=1.0)
        # Registered last, so a feed-forward model's parameters keep their names and order.
        core = cfg.core
        self.core = RecurrentCore(core, torso_dim) if core is not None and core.shared else None
        self.cores = (
            nn.ModuleList(RecurrentCore(core, torso_dim) for _ in tasks)
            if core is not None and not core.shared
            else None
        )
        self.state_size = 0 if core is None else state_size(core)
        """Floats of recurrent state per env copy (0: feed-forward)."""
        self.per_task_modules = ("encoders", "policy_heads") + (
            ("cores",) if self.cores is not None else ()
        )
        """Names of the per-task ``ModuleList``s (what task sharding splits over ranks)."""

    @property
    def recurrent(self) -> bool:
        """Whether the model has a recurrent core (its actors must keep per-env states)."""
        return self.state_size > 0

    def run_torso(self, x: torch.Tensor, tasks: torch.Tensor | int) -> torch.Tensor:
        """The torso on ``x`` ``[*B, encoder_dim]`` whose rows belong to ``tasks`` (``[*B]``
        long, or one task for all; only a task-conditioned torso reads it)."""
        return self.torso(x, tasks) if self.conditioned else self.torso(x)

    def shared_parameters(self) -> list[nn.Parameter]:
        """Parameters every task's loss reaches: the torso's and a shared recurrent core's
        (the value head's rows are per task; encoders, heads, per-task cores and a
        conditioned torso's task embeddings are owned)."""
        shared = shared_torso_parameters(self.torso)
        if self.core is not None:
            shared += [p for p in self.core.parameters() if p.requires_grad]
        return shared

    def _check_task(self, task: int) -> int:
        if not 0 <= task < self.num_tasks:
            raise IndexError(f"task {task} out of range: the model has {self.num_tasks} tasks")
        return int(task)

    def features(self, task: int, obs: Obs) -> torch.Tensor:
        """Torso output ``[*B, D]`` (the core's input; the heads' input without a core)."""
        task = self._check_task(task)
        return self.run_torso(self.encoders[task](obs), task)

    def embed(self, task: int, obs: Obs) -> torch.Tensor:
        """Features ``h [*B, H]`` of a feed-forward model; value = ``h @ value_weight[task] +
        value_bias[task]``. A recurrent model needs states: :meth:`step` or :meth:`unroll`."""
        if self.recurrent:
            raise ValueError(
                "this model has a recurrent core: use step(task, obs, state) for one row or "
                "unroll(task, obs, state, resets) for a sequence"
            )
        return self.features(task, obs)

    def embed_many(self, tasks: Sequence[int], obs: Sequence[Obs]) -> torch.Tensor:
        """Features ``[Σn, H]`` of several tasks' observations (each ``[n_k, *obs]``), rows
        task by task in the given order: each task's encoder, then *one* torso pass over all
        rows. The same values as :meth:`embed` task by task, in fewer, larger calls (what a
        learner that draws a mixed batch every step wants). Feed-forward models only."""
        if self.recurrent:
            raise ValueError("embed_many runs feed-forward models; a recurrent core needs states")
        encoders = [self.encoders[self._check_task(k)] for k in tasks]
        parts = stacked.encode_many(encoders, [(o,) for o in obs])
        x = torch.cat(parts)
        if not self.conditioned:
            return self.torso(x)
        ids = torch.tensor(list(tasks), device=x.device)
        rows = torch.repeat_interleave(
            ids, torch.tensor([p.shape[0] for p in parts], device=x.device)
        )
        return self.torso(x, rows)

    def initial_state(
        self, num_envs: int, device: torch.device | str | None = None
    ) -> torch.Tensor:
        """Zero states ``[num_envs, state_size]`` (float32): env copies at an episode start."""
        return torch.zeros(num_envs, self.state_size, device=device)

    def core_of(self, task: int) -> RecurrentCore:
        """The recurrent core task ``task`` runs through (the shared one, or its own)."""
        task = self._check_task(task)
        if self.cores is not None:
            return self.cores[task]
        if self.core is None:
            raise ValueError("this model is feed-forward: it has no recurrent core")
        return self.core

    def step(self, task: int, obs: Obs, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One row ``obs [N]`` from ``state [N, S]``: features ``h [N, H]`` and the next state.

        The caller zeroes a copy's state where its row starts an episode
        (:func:`mtrl.learner.recurrent.reset_state`). Feed-forward: the state passes through.
        """
        x = self.features(task, obs)
        if not self.recurrent:
            return x, state
        return self.core_of(task).step(x, state)

    def unroll(
        self, task: int, obs: Obs, state: torch.Tensor, resets: torch.Tensor
    ) -> torch.Tensor:
        """Features ``[L, N, H]`` of a sequence ``obs [L, N]`` run from ``state [N, S]``;
        ``resets [L, N]`` zeroes the state before the rows that start an episode
        (:func:`mtrl.learner.recurrent.sequence_resets` for an unroll)."""
        (h,) = self.run_cores([task], [self.features(task, obs)], [state], [resets])
        return h

    def run_cores(
        self,
        tasks: Sequence[int],
        xs: Sequence[torch.Tensor],
        states: Sequence[torch.Tensor],
        resets: Sequence[torch.Tensor],
    ) -> list[torch.Tensor]:
        """The cores over several tasks' torso features ``xs[i] [L_i, N_i, D]`` at once.

        Sequences that share a core and a length run as one batch (their env columns side by
        side), so a shared core costs ``L`` cell calls per update whatever the number of tasks.
        Feed-forward: ``xs`` unchanged.
        """
        if not self.recurrent:
            return list(xs)
        groups: dict[tuple[int, int], list[int]] = {}
        for i, (task, x) in enumerate(zip(tasks, xs, strict=True)):
            key = (task if self.cores is not None else -1, x.shape[0])
            groups.setdefault(key, []).append(i)
        out: list[torch.Tensor] = list(xs)
        for members in groups.values():
            core = self.core_of(tasks[members[0]])
            x = torch.cat([xs[i] for i in members], dim=1)
            state = torch.cat([states[i] for i in members])
            reset = torch.cat([resets[i] for i in members], dim=1)
            h, _ = core(x, state, reset)
            parts = h.split([xs[i].shape[1] for i in members], dim=1)
            for i, part in zip(members, parts, strict=True):
                out[i] = part
        return out

    def value(self, task: int, h: torch.Tensor) -> torch.Tensor:
        """Normalised value ``[*B]`` of task ``task`` from features ``h [*B, H]`` (the torso's,
        or the recurrent core's)."""
        return h @ self.value_weight[task].to(h.dtype) + self.value_bias[task].to(h.dtype)

    def has_action_mask(self, task: int) -> bool:
        """Whether task ``task``'s Dict observation carries an ``action_mask``."""
        return self._masked[self._check_task(task)]

    def action_mask(self, task: int, obs: Obs) -> torch.Tensor | None:
        """The legal-action mask ``[*B, n]`` inside ``obs``, or None if the task has none."""
        return obs[ACTION_MASK_KEY] if self.has_action_mask(task) else None

    def policy(
        self, task: int, h: torch.Tensor, action_mask: torch.Tensor | None = None
    ) -> PolicyDist:
        """Task ``task``'s policy from features ``h [*B, H]`` (batch shape ``[*B]``).

        A task with an action mask needs it here, sliced like ``h`` (e.g.
        ``model.action_mask(k, obs)[:-1]`` for ``h[:-1]``); without it the log-probs would
        not match the behaviour policy's.
        """
        if action_mask is None and self.has_action_mask(task):
            raise ValueError(
                f"task {task} has an {ACTION_MASK_KEY!r} in its observation: pass it to "
                "policy(task, h, action_mask) sliced like h"
            )
        return self.policy_heads[task](h, action_mask)

    def forward(
        self, task: int, obs: Obs, state: torch.Tensor | None = None
    ) -> tuple[PolicyDist, torch.Tensor]:
        """Policy (batch shape ``[*B]``) and PopArt-normalised value ``[*B]`` of task ``task``.

        A recurrent model takes one row ``obs [N]`` and acts from ``state`` (zeros when None,
        i.e. as at an episode start); use :meth:`step` to get the next state too.
        """
        if self.recurrent:
            n = len(next(iter(obs.values())) if isinstance(obs, dict) else obs)
            start = self.initial_state(n, self.value_bias.device) if state is None else state
            h, _ = self.step(task, obs, start)
        else:
            h = self.embed(task, obs)
        return self.policy(task, h, self.action_mask(task, obs)), self.value(task, h)

    def task_parameters(self, task: int) -> list[nn.Parameter]:
        """Parameters only task ``task`` uses (its encoder, policy head and, with per-task
        cores, its core; not the value rows)."""
        task = self._check_task(task)
        own = [self.encoders[task], self.policy_heads[task]]
        if self.cores is not None:
            own.append(self.cores[task])
        return [p for m in own for p in m.parameters()]

    def extra_repr(self) -> str:
        core = f", state_size={self.state_size}" if self.recurrent else ""
        return f"num_tasks={self.num_tasks}, hidden_dim={self.hidden_dim}{core}"
