"""SAC's gradient step in a few large calls.

The per-task step (:mod:`mtrl.algorithms.sac.per_task_step`) runs each task's encoders and heads on
that task's own rows: with MT10's ten tasks, ten small matmuls per layer, forward and backward,
for each of the step's network passes, optimisers over a hundred tensors, and bookkeeping
between them — on one CPU core MT10's step was mostly dispatch, not arithmetic, and on a GPU
every one of those calls is a kernel launch (docs/BENCHMARKS.md, "The learner at the speed of
its arithmetic"). Here instead:

* **tasks of one shape form a group** (:class:`~mtrl.algorithms.sac.stacked_batch.GroupSpec`:
  one observation shape, one action kind and size), and a group's transitions are one padded
  block ``[K_g, m, ·]``, drawn from the replays exactly as the per-task step draws them and
  moved to the device with every other group's in one copy;
* **every per-task layer of a group is one batched call**
  (:mod:`mtrl.algorithms.sac.stacked_nets`): the tasks' weights live in one ``[K_g, out, in]``
  tensor that the per-task modules alias, so the actors, checkpoints and state dicts see the
  same modules as before; the shared torsos run once over every group's rows;
* **the twin critics are one ensemble** (``[2 K_g]`` encoder and head members, a ``[2]`` torso);
* **the policy runs once** over the next observations and the observations (the critic step
  between its two uses leaves it unchanged); the optimisers step a handful of tensors;
* the policy's pass through the critics detaches their weights instead of switching each
  parameter's ``requires_grad``; nothing reads a device value back on the host, so on a GPU the
  whole step is recorded once as a CUDA graph and replayed (:mod:`mtrl.algorithms.sac.graphed`).

The math is the per-task step's, term by term (``tests/algorithms/test_sac_stacked_step.py``
compares one step of each, values and gradients: Box and Discrete tasks, vector and image
observations, prioritized replay, combined task gradients, FAMO's weighted critic losses, a
task-conditioned torso, one task).
:func:`why_not` says when a learner must keep the per-task step (Dict or Tuple observations,
per-task step sizes, integers past float32's range), :func:`pays` when it is the faster one
(on a CUDA GPU; on a CPU where every task's encoders stack, or a group holds several tasks).
:data:`ENABLED` forces either
path, to compare (``benchmarks/learner_update.py --stacked-step``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from mtrl.algorithms.sac import device_replay, graphed, losses
from mtrl.algorithms.sac.device_replay import DeviceReplay
from mtrl.algorithms.sac.graphed import GraphedStep
from mtrl.algorithms.sac.networks import SquashedGaussianHead, squash_log_std
from mtrl.algorithms.sac.stacked_batch import GroupBatch, GroupSpec, on_device, views
from mtrl.algorithms.sac.stacked_nets import Critics, Policy, stackable_encoder
from mtrl.learner.device import to_device
from mtrl.learner.distributions import CategoricalHead
from mtrl.learner.stacked import stack_signature

__all__ = ["ENABLED", "StackedSac", "pays", "task_groups", "why_not"]

ENABLED: bool | None = None
"""None (the default): take the stacked step where :func:`why_not` allows and it pays (:func:`pays`)
— on a CUDA GPU always (the step becomes one CUDA graph); on a CPU where every task's encoders
stack (vector tasks, even in groups of one: its twin critics as one ensemble and its few
optimiser tensors cost fewer calls than the per-task step's) or some group holds several tasks.
A task whose encoder cannot stack (an image's convolutions) runs its own modules inside the
stacked step, which on a CPU core measured slower than the per-task step when no group of
several tasks pays for it (docs/BENCHMARKS.md, "The learner at the speed of its arithmetic").
True: wherever :func:`why_not` allows; False: never."""

SacLearner = Any
"""A :class:`~mtrl.algorithms.sac.learner.SacLearner` (which imports this module)."""

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def why_not(learner: SacLearner, lr_scales: Sequence[float] | None) -> str | None:
    """Why ``learner`` keeps the per-task step, or None where it can take the stacked one:
    every observation an array (``Box``, ``Discrete``, ``MultiBinary``, ``MultiDiscrete``; not
    ``Dict`` or ``Tuple``), every action ``Box`` or ``Discrete`` (no action masks), one step
    size for every task."""
    if any(float(s) != 1.0 for s in lr_scales or ()):
        return "per-task learning-rate scales"
    for k, t in enumerate(learner.model.spaces):
        if isinstance(t.observation_space, (spaces.Dict, spaces.Tuple)):
            return f"task {k}'s observation is a {type(t.observation_space).__name__}"
        if not isinstance(t.observation_space.shape, tuple) or t.observation_space.shape is None:
            return f"task {k}'s observation has no array shape"
        if _beyond_float32(t.observation_space):
            return f"task {k}'s integer observations reach past float32's exact range"
        head = learner.model.policy_heads[k]
        if isinstance(t.action_space, spaces.Box):
            if not isinstance(head, SquashedGaussianHead):
                return f"task {k}'s policy head is not SAC's squashed Gaussian"
        elif not (
            isinstance(t.action_space, spaces.Discrete)
            and isinstance(head, CategoricalHead)
            and head.act_shape == ()
            and not head.padded
        ):
            return f"task {k}'s {type(t.action_space).__name__} action"
    return None


def _beyond_float32(space: spaces.Space) -> bool:
    """Whether an integer space's values may not survive the batch's float32 block exactly
    (beyond ±2**24, or unbounded)."""
    dtype = getattr(space, "dtype", None)
    if dtype is None or not np.issubdtype(dtype, np.integer):
        return False
    if isinstance(space, spaces.Discrete):
        return abs(int(space.start)) + int(space.n) > 2**24
    low, high = getattr(space, "low", None), getattr(space, "high", None)
    if low is None or high is None:
        return False
    return bool(np.max(np.abs(np.asarray(low, np.float64))) > 2**24) or bool(
        np.max(np.abs(np.asarray(high, np.float64))) > 2**24
    )


def task_groups(learner: SacLearner) -> tuple[list[GroupSpec], list[bool]]:
    """The tasks grouped by observation shape, action kind and size and encoder shapes, and
    whether each group's encoders run stacked; a task whose encoders cannot stack (images,
    scaled integers, one-hot inputs, the action joined after the encoder) is a group of its
    own."""
    model, critic = learner.model, learner.critic
    found: dict[Any, tuple[list[int], tuple[int, ...], bool, int, bool]] = {}
    for k, t in enumerate(model.spaces):
        box = isinstance(t.action_space, spaces.Box)
        act = int(np.prod(t.action_space.shape)) if box else int(t.action_space.n)
        shape = tuple(int(d) for d in t.observation_space.shape)
        stack = stackable_encoder(model.encoders[k], "prep") and all(
            stackable_encoder(q.encoders[k], "scale" if box else "prep")
            and (not box or q.action_at_input[k])
            for q in (critic.q1, critic.q2)
        )
        mlps = (model.encoders[k], critic.q1.encoders[k])
        key = (shape, box, act, *(stack_signature(e.mlp) for e in mlps)) if stack else ("alone", k)
        found.setdefault(key, ([], shape, box, act, stack))[0].append(k)
    groups = [GroupSpec(tuple(ts), shape, box, act) for ts, shape, box, act, _ in found.values()]
    return groups, [stack for *_, stack in found.values()]


def pays(learner: SacLearner) -> bool:
    """Whether the stacked step is the faster one for ``learner`` (:data:`ENABLED`'s default):
    on a CUDA GPU; on a CPU where every task's encoders stack or a group of stacked encoders
    holds several tasks."""
    if learner.device.type == "cuda":
        return True
    groups, stacked = task_groups(learner)
    return all(stacked) or any(s and len(g.tasks) > 1 for g, s in zip(groups, stacked, strict=True))


class StackedSac:
    """The stacked gradient step of one :class:`~mtrl.algorithms.sac.learner.SacLearner`
    (see the module docstring); built by :meth:`build` where :func:`why_not` allows."""

    def __init__(self, learner: SacLearner) -> None:
        model = learner.model
        self.learner = learner
        self.num_tasks = model.num_tasks
        self.groups, stacked = task_groups(learner)
        self.policy = Policy(model, self.groups, stacked)
        self.critic = Critics(learner.critic, self.groups, stacked)
        self.target = Critics(learner.target, self.groups, stacked)
        for p in self.target.params:
            p.requires_grad_(False)
        value = {id(model.value_weight), id(model.value_bias)}  # SAC has no state value
        skip = self.policy.aliased | value
        self.actor_params = self.policy.own + [
            p for p in model.parameters() if id(p) not in skip and p.requires_grad
        ]
        device = learner.device
        self._index = [torch.tensor(g.tasks, device=device) for g in self.groups]
        """Each group's tasks, on the device (a per-task ``[K]`` vector's group part)."""
        order = [t for g in self.groups for t in g.tasks]
        self._inverse = torch.tensor(np.argsort(order), device=device)
        """Where each task sits group by group: per task is ``cat(groups)[inverse]``."""
        self._rows: dict[tuple[int, ...], torch.Tensor] = {}
        self.graphed = (
            GraphedStep(self.step_on_flat, learner.device, len(self.groups))
            if graphed.why_not(learner) is None
            else None
        )
        """The step as a replayed CUDA graph (:mod:`mtrl.algorithms.sac.graphed`), or None:
        eager."""
        self.replay: DeviceReplay | None = None
        """The replays' mirror on the device the batches are drawn from
        (:mod:`mtrl.algorithms.sac.device_replay`; :meth:`mirror_replay`), or None: drawn on
        the host."""

    def mirror_replay(self) -> None:
        """Draw each step's batch on the device from a mirror of the learner's replays, where
        :func:`mtrl.algorithms.sac.device_replay.why_not` allows (call once the replays
        exist)."""
        lr = self.learner
        if device_replay.why_not(lr) is not None:
            return
        self.replay = DeviceReplay(self.groups, lr.replays, lr.device)
        if self.graphed is not None:
            self.graphed.step = self.step_on_counts

    @classmethod
    def build(cls, learner: SacLearner, lr_scales: Sequence[float] | None) -> StackedSac | None:
        """The stacked step for ``learner``, or None where it keeps the per-task step
        (:data:`ENABLED`)."""
        if ENABLED is False or why_not(learner, lr_scales) is not None:
            return None
        if ENABLED is None and not pays(learner):
            return None
        return cls(learner)

    def _task_rows(self, rows: Sequence[int]) -> torch.Tensor:
        """Each torso row's task for groups of ``rows`` rows per task, group by group (for a
        task-conditioned torso; cached per layout)."""
        key = tuple(rows)
        if key not in self._rows:
            ids = [
                np.repeat(np.asarray(g.tasks), m) for g, m in zip(self.groups, rows, strict=True)
            ]
            self._rows[key] = torch.as_tensor(np.concatenate(ids)).to(self.learner.device)
        return self._rows[key]

    def _per_task(self, parts: Sequence[torch.Tensor]) -> torch.Tensor:
        """Per-group ``[K_g, ...]`` values as one per-task ``[K, ...]`` tensor."""
        return torch.cat(list(parts)).index_select(0, self._inverse)

    # -- one gradient step -----------------------------------------------------------------------

    def gradient_step(self, ready: Sequence[int]) -> torch.Tensor:
        """One critic, policy and temperature step on a fresh mixed batch (the per-task step's
        math); returns the three losses (float64 ``[3]``, on the device)."""
        lr = self.learner
        counts = lr.mix.split(lr.sac.batch_size, ready, lr.rng)
        rows = self.graphed.rows if self.graphed is not None else None
        if self.replay is not None:  # drawn on the device: only the counts cross
            request = self.replay.request(ready, counts, rows)
            if self.graphed is not None:
                return self.graphed.run(request)
            return self.step_on_counts(to_device(request.flat, lr.device), request.rows)[0]
        host = lr._draw_stacked(ready, counts, rows)
        if self.graphed is not None:
            return self.graphed.run(host)
        batches, count = on_device(self.groups, host, lr.device)
        losses_, tds = self.step_on(batches, count)
        if lr.cfg.replay.prioritized:
            errors = [td.cpu().numpy() for td in tds]
            where = {t: (gi, i) for gi, g in enumerate(self.groups) for i, t in enumerate(g.tasks)}
            for task, idx in host.indices.items():
                gi, i = where[task]
                lr.replays[task].update_priorities(idx, errors[gi][i, : len(idx)])
        return losses_

    def step_on_flat(
        self, flat: torch.Tensor, rows: Sequence[int]
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """:meth:`step_on` the device copy of a :class:`HostBatch`'s flat buffer."""
        batches, count = views(self.groups, rows, flat)
        return self.step_on(batches, count)

    def step_on_counts(
        self, counts: torch.Tensor, rows: Sequence[int]
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """:meth:`step_on` a batch drawn on the device from :attr:`replay`, ``counts`` rows of
        each task (``[K]``) in blocks of ``rows`` rows per task."""
        assert self.replay is not None
        batches, _ = self.replay.draw(counts, rows)
        return self.step_on(batches, counts)

    def step_on(
        self, batches: Sequence[GroupBatch], count: torch.Tensor
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The step's device work on the groups' ``batches`` (``count``: each task's rows):
        the three losses (float64 ``[3]``) and each group's |TD| ``[K_g, m]``. No host
        synchronisation (a CUDA graph can capture it)."""
        lr = self.learner
        m = [b.obs.shape[1] for b in batches]
        alpha_now = lr.alpha
        alphas = [alpha_now.index_select(0, i).unsqueeze(1) for i in self._index]  # [K_g, 1]
        rows = self._task_rows(m)
        # The policy at the next observations without a graph (one pass over both halves would
        # back-propagate through the half no loss reaches: more arithmetic than calls saved).
        with torch.no_grad():
            nxt = self._actions([b.next_obs for b in batches], rows)
            ys = self._targets(batches, nxt, alphas, rows)
        critic_loss, qs, tds = self._critic_step(batches, ys, rows, count)
        now = self._actions([b.obs for b in batches], rows)
        actor_loss, entropies = self._actor_step(batches, now, alphas, rows, count)
        per_task = self._per_task
        masked = [(h * b.mask).sum(1) for h, b in zip(entropies, batches, strict=True)]
        alpha_loss = self._temperature_step(count, per_task(masked))
        with torch.no_grad():
            torch._foreach_lerp_(self.target.params, self.critic.params, lr.sac.tau)
        sums = [
            torch.stack([h, q[0].detach(), td], dim=-1).mul_(b.mask.unsqueeze(-1)).sum(1)
            for h, q, td, b in zip(entropies, qs, tds, batches, strict=True)
        ]
        lr.diagnostics.add(count, alpha_now, per_task(sums))
        return torch.stack([critic_loss, actor_loss, alpha_loss]).detach().double(), tds

    def _targets(
        self,
        batches: Sequence[GroupBatch],
        nxt: Sequence[tuple[torch.Tensor | None, torch.Tensor]],
        alphas: Sequence[torch.Tensor],
        rows: torch.Tensor,
    ) -> list[torch.Tensor]:
        """Each group's soft targets ``[K_g, m]`` from the target critics at the next
        observations and the policy's actions there."""
        gamma = self.learner.cfg.gamma
        tq = self.target(
            [(b.next_obs, a) for b, (a, _) in zip(batches, nxt, strict=True)], rows, True
        )
        ys = []
        for g, b, (_, aux), out, alpha in zip(self.groups, batches, nxt, tq, alphas, strict=True):
            q = self._values(g, out)
            if g.box:
                v = losses.continuous_next_value(q[0], q[1], aux, alpha)
            else:
                v = losses.discrete_next_value(q[0], q[1], aux, alpha.expand(aux.shape[:2]))
            ys.append(losses.soft_target(b.rewards, b.terminated, gamma, v))
        return ys

    def _critic_step(
        self,
        batches: Sequence[GroupBatch],
        ys: Sequence[torch.Tensor],
        rows: torch.Tensor,
        count: torch.Tensor,
    ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """The critics' step towards ``ys`` at the stored actions: the loss, each group's
        ``Q`` ``[2, K_g, m]`` and |TD| ``[K_g, m]``."""
        lr = self.learner
        inputs = [
            (b.obs, torch.tanh(b.actions) if g.box else None)
            for g, b in zip(self.groups, batches, strict=True)
        ]

        out = lr.critic_out

        def critic_rows() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
            """Each group's ``Q`` of the stored actions and critic loss per row."""
            outs = [
                self._taken(g, b, self._outputs(g, o))
                for g, b, o in zip(
                    self.groups, batches, self.critic(inputs, rows, False), strict=True
                )
            ]
            per_row = [
                out.loss(o[0], o[1], y, b.weights)
                for o, y, b in zip(outs, ys, batches, strict=True)
            ]
            return [out.value(o) for o in outs], per_row

        qs, per_row = critic_rows()
        if lr.famo is None:
            loss = self._descend(lr.critic_opt, per_row, self.critic.params, count)
        else:
            loss = self._famo_descend(per_row, count, lambda: critic_rows()[1])
        tds = [(0.5 * (q - y).abs().sum(0)).detach() for q, y in zip(qs, ys, strict=True)]
        return loss, qs, tds

    def _actor_step(
        self,
        batches: Sequence[GroupBatch],
        now: Sequence[tuple[torch.Tensor | None, torch.Tensor]],
        alphas: Sequence[torch.Tensor],
        rows: torch.Tensor,
        count: torch.Tensor,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The policy's step through the (just updated, frozen) critics: the loss and each
        group's entropy estimate ``[K_g, m]``."""
        lr = self.learner
        pq = self.critic([(b.obs, a) for b, (a, _) in zip(batches, now, strict=True)], rows, True)
        per_row, entropies = [], []
        for g, b, (_, aux), out, alpha in zip(self.groups, batches, now, pq, alphas, strict=True):
            q = self._values(g, out)
            if g.box:
                term = losses.continuous_actor_loss(aux, q[0], q[1], alpha)
                entropies.append(-aux.detach())
            else:
                term = losses.discrete_actor_loss(aux, q[0], q[1], alpha.expand(aux.shape[:2]))
                entropies.append(losses.discrete_entropy(aux).detach())
            per_row.append(term * b.mask)
        loss = self._descend(lr.actor_opt, per_row, self.actor_params, count)
        return loss, entropies

    def _descend(
        self,
        opt: torch.optim.Optimizer,
        per_row: Sequence[torch.Tensor],
        params: Sequence[torch.Tensor],
        count: torch.Tensor,
    ) -> torch.Tensor:
        """One step of ``opt`` on the batch's mean of the groups' ``per_row`` losses (each
        task's part apart where the tasks' gradients are combined); returns the loss."""
        n = float(self.learner.sac.batch_size)  # the rows of every step (the counts' sum)
        loss = sum(r.sum() for r in per_row) / n
        self.learner._step(opt, loss, params, self._by_task(per_row, count, n))
        return loss

    def _famo_descend(
        self,
        per_row: Sequence[torch.Tensor],
        count: torch.Tensor,
        measure: Callable[[], Sequence[torch.Tensor]],
    ) -> torch.Tensor:
        """The critics' step on FAMO's weighting of the tasks' critic losses (the groups'
        ``per_row``), then FAMO's logit step from the loss ``measure`` finds on the same rows
        after it (:mod:`mtrl.algorithms.sac.famo`); returns the plain mean loss."""
        lr = self.learner
        assert lr.famo is not None
        scales = lr.famo.row_scales(count, self._per_task([r.detach().sum(1) for r in per_row]))
        weighted = sum(
            (r * scales.index_select(0, i).unsqueeze(1)).sum()
            for r, i in zip(per_row, self._index, strict=True)
        )
        lr._step(lr.critic_opt, weighted, self.critic.params)
        with torch.no_grad():
            lr.famo.update(self._per_task([r.sum(1) for r in measure()]))
        return sum(r.sum() for r in per_row) / float(lr.sac.batch_size)

    def _temperature_step(self, count: torch.Tensor, entropy: torch.Tensor) -> torch.Tensor:
        """Each task's temperature towards its target entropy, from its rows' summed entropy
        ``[K]`` (over every replica's rows); tasks absent from the batch add nothing."""
        lr = self.learner
        task_count, total_h = lr._task_sums(count, entropy)
        present = (task_count > 0).to(total_h.dtype)
        mean_h = total_h / task_count.clamp(min=1)
        loss = (losses.temperature_loss(lr.log_alpha, mean_h, lr.target_entropy) * present).sum()
        lr._step(lr.alpha_opt, loss, [lr.log_alpha], reduce=False)
        return loss

    def _actions(
        self, obs: Sequence[torch.Tensor], rows: torch.Tensor
    ) -> list[tuple[torch.Tensor | None, torch.Tensor]]:
        """The policy at each group's ``obs``: the critics' action input (a reparameterised
        squashed action ``[K_g, m, a]`` for Box, None for Discrete) and what the losses need
        (the sample's log-density ``[K_g, m]``, or all log-probabilities ``[K_g, m, n]``)."""
        out = []
        for g, head in zip(self.groups, self.policy(obs, rows), strict=True):
            if not g.box:
                out.append((None, torch.log_softmax(head.float(), dim=-1)))
                continue
            mean, raw = head.split(g.act, dim=-1)
            log_std = squash_log_std(raw)
            noise = self.learner._noise_like(mean)
            u = mean + log_std.exp() * noise
            raw_logp = (-0.5 * noise.square() - log_std).sum(-1) - g.act * _HALF_LOG_2PI
            out.append((torch.tanh(u), losses.squashed_log_prob(raw_logp, u)))
        return out

    def _outputs(self, g: GroupSpec, q: torch.Tensor) -> torch.Tensor:
        """A group's critic outputs ``[2, K_g, m, out]`` per action: ``Q`` ``[2, K_g, m]``
        (Box) or ``[2, K_g, m, n]`` (Discrete), a categorical critic's logits with a last
        ``bins`` dim after those."""
        out = self.learner.critic_out
        if out.categorical:
            return q if g.box else q.reshape(*q.shape[:-1], g.act, out.bins)
        return q[..., 0] if g.box else q

    def _values(self, g: GroupSpec, q: torch.Tensor) -> torch.Tensor:
        """A group's ``Q`` (``[2, K_g, m]`` or ``[2, K_g, m, n]``) from its critic outputs."""
        return self.learner.critic_out.value(self._outputs(g, q))

    @staticmethod
    def _taken(g: GroupSpec, b: GroupBatch, q: torch.Tensor) -> torch.Tensor:
        """:meth:`_outputs` ``q`` of the stored actions (``[2, K_g, m, *out]``): a Box group's
        as they are, a Discrete group's gathered at each row's action."""
        if g.box:
            return q
        index = b.actions.reshape(1, *b.actions.shape, 1, *([1] * (q.ndim - 4)))
        return q.gather(3, index.expand(2, *b.actions.shape, 1, *q.shape[4:])).squeeze(3)

    def _by_task(
        self, per_row: Sequence[torch.Tensor], count: torch.Tensor, n: float
    ) -> dict[int, torch.Tensor] | None:
        """Each present task's part of the batch's mean loss (only when the tasks' gradients
        are combined: ``learner.multitask.gradients``; reads the counts on the host)."""
        if not self.learner.combining:
            return None
        parts = self._per_task([r.sum(1) for r in per_row]) / n
        present = count.cpu().numpy() > 0
        return {task: parts[task] for task in np.flatnonzero(present).tolist()}
