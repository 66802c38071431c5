"""The SAC learning rule (``learner.algorithm: sac``): multi-task soft actor-critic over a
per-task replay, behind the same :class:`~mtrl.learner.protocol.Learner` protocol as IMPALA.

One :meth:`SacLearner.update` (the trainer calls it with fresh unrolls, one
:class:`~mtrl.learner.batch.TaskBatch` each):

1. every unroll is copied into its task's :class:`~mtrl.replay.TaskReplay` (transitions with
   their next observation; reset steps never sampled) — or, stored already by its Ray actor
   in a shard on the actor's node (sharded replay, :meth:`SacLearner.shard_routes`), comes as
   a :class:`~mtrl.actors.shard_insert.ShardedUnroll` whose acknowledgement and observation
   moments are taken in;
2. the new env steps of the tasks whose replay holds ``learning_starts`` transitions owe
   ``replay_ratio x steps / batch_size`` gradient steps, the fraction carried
   (:class:`~mtrl.algorithms.sac.sampling.ReplayRatio`);
3. each gradient step draws one batch across the ready tasks, each in proportion to its share
   of the weighted fresh data (:class:`~mtrl.algorithms.sac.sampling.TaskMix`), and takes a
   critic step (clipped double-Q towards the soft target of the Polyak-averaged target
   critics; with ``learner.multitask.loss_weighting: famo`` the tasks' critic losses weighted
   by FAMO, :mod:`mtrl.algorithms.sac.famo`), a policy step and a temperature step (one
   learned ``α`` per task), then moves the target critics by ``tau``
   (:mod:`mtrl.algorithms.sac.losses` has the math);
4. with ``learner.sac.reset_every``, after every ``reset_every``-th gradient step of the run
   the networks (and with ``reset: all`` the temperatures) are re-initialised in place, the
   replay kept (:mod:`mtrl.algorithms.sac.resets`);
5. the policy version goes up by one; the trainer publishes ``model`` to the actors.

The actors act with :attr:`SacLearner.model`, the trainer's
:class:`~mtrl.learner.model.MultiTaskModel` with SAC's squashed-Gaussian heads on its ``Box``
tasks (:mod:`mtrl.algorithms.sac.networks`); the critics are a separate network the actors never
see. ``Discrete`` tasks use SAC-discrete (Christodoulou 2019): exact expectations over the
categorical in the soft value, the policy loss and the entropy.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from mtrl.actors.shard_insert import ShardedUnroll, ShardRoute
from mtrl.algorithms.feed import batch_to_unroll
from mtrl.algorithms.sac import categorical, device_replay, obs_norm, resets
from mtrl.algorithms.sac.batch import Group, draw_groups, group_key
from mtrl.algorithms.sac.checks import check_tasks
from mtrl.algorithms.sac.critic_output import critic_bins, critic_output
from mtrl.algorithms.sac.diagnostics import SacDiagnostics
from mtrl.algorithms.sac.famo import CriticFamo
from mtrl.algorithms.sac.networks import TwinCritic, install_policy_heads
from mtrl.algorithms.sac.per_task_step import PerTaskSac
from mtrl.algorithms.sac.sampling import ReplayRatio, TaskMix
from mtrl.algorithms.sac.settings import DEFAULT_CAPACITY, SacSettings
from mtrl.algorithms.sac.stacked_batch import HostBatch, draw
from mtrl.algorithms.sac.stacked_step import StackedSac
from mtrl.algorithms.sac.state import REFILL_NOTE, capture, restore
from mtrl.config import LearnerConfig
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel
from mtrl.learner.optim import adam_step, clear_grads, param_groups
from mtrl.learner.task_gradients import GradientCombiner
from mtrl.replay import (
    ReplayEmptied,
    ShardedTaskReplay,
    TaskReplay,
    TransitionStorage,
    actor_routes,
    replay_metrics,
    set_beta,
    set_wait_hook,
    task_replay,
)

__all__ = ["REFILL_NOTE", "SacLearner"]


def _target_entropy(space: spaces.Space, sac: SacSettings) -> float:
    if isinstance(space, spaces.Box):
        return sac.box_target_entropy * float(np.prod(space.shape))
    return sac.discrete_target_entropy * math.log(int(space.n))


class SacLearner:
    """Policy, twin critics and their targets, per-task temperatures and replays."""

    distributed = False
    world = 1
    """Learner replicas whose gradients are averaged (data-parallel replicas: their number)."""

    def __init__(
        self,
        model: MultiTaskModel,
        cfg: LearnerConfig,
        task_names: Sequence[str],
        lr_scales: Sequence[float] | None = None,
    ) -> None:
        """``model`` gets SAC's heads on its ``Box`` tasks here (before it reaches the
        actors); ``lr_scales``: per task, a multiplier on the policy step size of its own
        encoder and head (``TaskConfig.learning_rate_scale``)."""
        check_tasks(model.spaces, task_names)
        self.device = next(model.parameters()).device
        install_policy_heads(model)
        self.model = model.to(self.device)
        # The validated learner.sac section, however the config was parsed (a config parsed
        # without the rules' models holds it as a plain mapping).
        settings = cfg.settings("sac", SacSettings)
        if cfg.sac is not settings:
            cfg = cfg.with_settings("sac", settings)
        self.cfg, self.sac = cfg, settings
        self.task_names = list(task_names)
        self.spaces = model.spaces
        self.box = [isinstance(t.action_space, spaces.Box) for t in self.spaces]
        k = len(task_names)
        sac = self.sac
        self.critic = TwinCritic(model, cfg.model, sac.critic_action, critic_bins(sac))
        self.critic = self.critic.to(self.device)
        # learner.sac.critic: the critics' outputs to Q, and their loss.
        self.critic_out = critic_output(sac, self.device)
        self.target = copy.deepcopy(self.critic).requires_grad_(False)
        # learner.sac.normalize_obs: running statistics in front of every encoder.
        self.obs_norm = obs_norm.for_learner(self)
        self.log_alpha = torch.full(
            (k,), math.log(sac.initial_alpha), device=self.device, requires_grad=True
        )
        self.target_entropy = torch.tensor(
            [_target_entropy(t.action_space, sac) for t in self.spaces], device=self.device
        )
        # learner.multitask.gradients: whether the tasks' gradients are combined (below).
        self.combining = cfg.multitask.gradients != "sum"
        # Tasks of one shape take the stacked step (a few large calls); the others, per task.
        self.stacked = StackedSac.build(self, lr_scales)
        self.per_task = PerTaskSac(self)
        if self.stacked is not None:
            actor_groups = [{"params": self.stacked.actor_params, "lr": sac.actor_lr}]
            self.actor_params = self.stacked.actor_params
            self.critic_params = self.stacked.critic.params
            self.target_params = self.stacked.target.params
            critic_shared = self.stacked.critic.shared
        else:
            value = {id(model.value_weight), id(model.value_bias)}  # SAC has no state value
            groups = [
                {**g, "params": [p for p in g["params"] if id(p) not in value]}
                for g in param_groups(model, lr_scales)
            ]
            actor_groups = [
                {**g, "lr": sac.actor_lr * g["lr_scale"]} for g in groups if g["params"]
            ]
            self.actor_params = [p for g in groups for p in g["params"]]
            self.critic_params = list(self.critic.parameters())
            self.target_params = list(self.target.parameters())
            critic_shared = [
                *self.critic.q1.shared_parameters(),
                *self.critic.q2.shared_parameters(),
            ]
        # Fused Adam: one kernel per step instead of one per tensor (SAC takes many small steps);
        # its step count on the device where a CUDA graph replays the step.
        graphs = self.stacked is not None and self.stacked.graphed is not None
        adam = {"fused": True, "capturable": graphs}
        self.actor_opt = torch.optim.Adam(actor_groups, **adam)
        self.critic_opt = torch.optim.Adam(self.critic_params, lr=sac.critic_lr, **adam)
        # Per optimiser, the combiner of the tasks' gradients of the parameters every task's
        # loss reaches.
        self.combiners = {
            id(self.actor_opt): GradientCombiner(cfg.multitask, model.shared_parameters(), k),
            id(self.critic_opt): GradientCombiner(cfg.multitask, critic_shared, k),
        }
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=sac.alpha_lr, **adam)
        # learner.multitask.loss_weighting: famo weighs the tasks' critic losses.
        self.famo = (
            CriticFamo(self, cfg.multitask, adam)
            if cfg.multitask.loss_weighting == "famo"
            else None
        )
        self.replays = [self._replay(i) for i in range(k)]
        if self.stacked is not None:  # on a GPU, the batches drawn there
            self.stacked.mirror_replay()
        if sac.draw_on_device and (self.stacked is None or self.stacked.replay is None):
            print(
                "learner.sac.draw_on_device is true, but the batches are drawn on the host: "
                f"{device_replay.why_not(self)}",
                flush=True,
            )
        self._keys = [group_key(t.action_space) for t in self.spaces]
        self.ratio = ReplayRatio(sac.replay_ratio, sac.batch_size)
        self.mix = TaskMix(k)
        # Seeded from torch's generator, which the trainer seeds from the run's seed.
        self.rng = np.random.default_rng(int(torch.randint(2**62, ()).item()))
        self.version = 0
        self.gradient_steps = 0
        self._losses: dict[str, float] = {}
        self.diagnostics = SacDiagnostics(task_names, self.device)
        self._edges_told: set[tuple[str, str]] = set()  # (task, support end) warned of

    def _replay(self, task: int) -> TaskReplay | ShardedTaskReplay:
        """Task ``task``'s replay of transitions, as the ``replay:`` section says."""
        space, replay = self.spaces[task], self.cfg.replay
        storage = TransitionStorage(
            task,
            space.observation_space,
            space.action_space,
            self.cfg.unroll_length,
            replay.capacity_or(DEFAULT_CAPACITY),
        )
        return task_replay(storage, replay)

    @property
    def local_tasks(self) -> list[int]:
        """Every task (data-parallel replicas each train all of them)."""
        return list(range(len(self.task_names)))

    @property
    def alpha(self) -> torch.Tensor:
        """Each task's temperature ``[K]`` (no gradient)."""
        return self.log_alpha.detach().exp()

    def set_progress(self, progress: float) -> None:
        """Anneal the importance-sampling exponent of prioritized replay towards 1."""
        set_beta(self.replays, self.cfg.replay, progress)

    def ready_tasks(self) -> list[int]:
        """Tasks whose replay holds at least ``learning_starts`` sampleable transitions."""
        need = max(self.sac.learning_starts, 1)
        return [k for k, r in enumerate(self.replays) if r.sampler.count >= need]

    def shard_routes(self) -> list[ShardRoute | None] | None:
        """Where each task's Ray actors store their unrolls (sharded replay with
        ``actor_inserts``: SAC draws only from its replay, so the unrolls need not come
        here); None: they come here."""
        return actor_routes(self.replays, self.cfg.replay)

    def set_wait_hook(self, hook: Callable[[], None] | None) -> None:
        """Call ``hook`` while a draw waits for the actors' inserts (``rate_limit.waits:
        learner``): the trainer takes their finished unrolls in meanwhile."""
        set_wait_hook(self.replays, hook)

    def update(self, batches: Sequence[TaskBatch | ShardedUnroll]) -> dict[str, float]:
        """Store ``batches`` (a :class:`ShardedUnroll` is stored already: its shard's answer
        is counted), then take the gradient steps the replay ratio owes for them."""
        weighted: dict[int, float] = {}
        mirror = self.stacked.replay if self.stacked is not None else None
        for b in batches:
            weighted[b.task] = weighted.get(b.task, 0.0) + b.num_steps * b.loss_weight
            if isinstance(b, ShardedUnroll):
                replay = self.replays[b.task]
                assert isinstance(replay, ShardedTaskReplay)
                replay.acknowledge(b)
                if self.obs_norm is not None and b.obs_moments is not None:
                    self.obs_norm.observe_moments(b.task, b.obs_moments)
                continue
            unroll = batch_to_unroll(b)
            items, live = self.replays[b.task].add_unroll(unroll)
            if self.obs_norm is not None:
                self.obs_norm.observe(b.task, unroll.obs)
            if mirror is not None:
                mirror.write(b.task, items, live)
        self.mix.observe(weighted)
        ready = self.ready_tasks()
        ready_set = set(ready)
        new_steps = sum(b.num_steps for b in batches if b.task in ready_set)
        steps = self._owed_steps(new_steps, bool(ready))
        sums = torch.zeros(3, dtype=torch.float64, device=self.device)
        every = self.sac.reset_every
        taken = 0
        while taken < steps and ready:
            try:
                sums += self._gradient_step(ready)
            except ReplayEmptied:  # a lost shard took a task's items: judge readiness again
                ready = self.ready_tasks()
                continue
            taken += 1
            if every is not None and (self.gradient_steps + taken) % every == 0:
                resets.reset(self)
        steps = taken
        self.gradient_steps += steps
        self.version += 1
        if steps:
            critic, actor, temperature = (self._batch_mean(sums) / steps).tolist()
            self._losses = {
                "losses/critic": critic,
                "losses/actor": actor,
                "losses/temperature": temperature,
            }
        metrics = {
            **self._losses,
            "charts/learner_samples": float(steps * self.sac.batch_size),
            "charts/learning_rate": self.sac.actor_lr,
            "sac/gradient_steps": float(self.gradient_steps),
            "sac/ready_tasks": float(len(ready)),
        }
        if every is not None:  # the resets so far: one after every reset_every gradient steps
            metrics["sac/resets"] = float(self.gradient_steps // every)
        return metrics

    def _owed_steps(self, new_steps: int, ready: bool) -> int:
        """Gradient steps owed for ``new_steps`` fresh env steps of ready tasks (none while
        no task is ready)."""
        return self.ratio.steps(new_steps) if ready else 0

    # -- one gradient step --------------------------------------------------------------------

    def _sample(self, ready: Sequence[int]) -> list[Group]:
        """One batch across the ready tasks (each its share of ``batch_size``), grouped."""
        counts = self.mix.split(self.sac.batch_size, ready, self.rng)
        return draw_groups(self.replays, self._keys, ready, counts, self.rng, self.device)

    def _draw_stacked(
        self, ready: Sequence[int], counts: Sequence[int], rows: Sequence[int] | None
    ) -> HostBatch:
        """The stacked step's batch: ``counts[i]`` transitions of task ``ready[i]`` laid out per
        group of tasks, with at least ``rows`` rows per task in each group."""
        assert self.stacked is not None
        return draw(self.stacked.groups, self.replays, ready, counts, self.rng, rows)

    def _noise_like(self, mean: torch.Tensor) -> torch.Tensor:
        """The reparameterisation's standard normal noise, one per action dim."""
        return torch.randn_like(mean)

    def _gradient_step(self, ready: Sequence[int]) -> torch.Tensor:
        """One critic, policy and temperature step on a fresh mixed batch; returns the three
        losses (float64 ``[3]``, on the device): the stacked step where the tasks allow it
        (:mod:`mtrl.algorithms.sac.stacked_step`), else the per-task step
        (:mod:`mtrl.algorithms.sac.per_task_step`)."""
        if self.stacked is not None:
            return self.stacked.gradient_step(ready)
        return self.per_task.gradient_step(ready)

    def _step(
        self,
        opt: torch.optim.Optimizer,
        loss: torch.Tensor,
        params: Sequence[torch.Tensor],
        task_losses: dict[int, torch.Tensor] | None = None,
        reduce: bool = True,
    ) -> None:
        """One optimiser step on ``loss`` (``reduce``: its gradients are this process's
        share of the batch's, to be combined with the other replicas'). With
        ``task_losses`` (``loss``'s parts per task), the shared parameters among ``params``
        step along the combination of the tasks' gradients instead."""
        clear_grads(opt)
        combiner = self.combiners[id(opt)] if task_losses else None
        grads = None
        if combiner is not None and combiner.params:
            grads = combiner.task_gradients(task_losses)
        loss.backward()
        if reduce:
            self._reduce_gradients(params)
        if combiner is not None and grads is not None:
            combiner.apply(self._reduce_task_gradients(grads), self.gradient_steps)
        if self.sac.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(params, self.sac.max_grad_norm)
        adam_step(opt)

    def _task_sums(
        self, count: torch.Tensor, total: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-task sample counts and entropy sums ``[K]`` of this gradient step, over the
        whole batch (here: this process's)."""
        return count, total

    def _reduce_gradients(self, params: Sequence[torch.Tensor]) -> None:
        """Make ``params``' gradients the whole batch's (here: already are)."""

    def _share_reset(self) -> None:
        """Make a reset's fresh networks every replica's (here: the only one)."""

    def _reduce_task_gradients(self, grads: torch.Tensor) -> torch.Tensor:
        """Per-task gradients ``[K, P]`` of the shared parameters, the whole batch's."""
        return grads

    def _batch_mean(self, losses: torch.Tensor) -> torch.Tensor:
        """Loss sums over this update's gradient steps, as the whole batch's (here: are)."""
        return losses

    def pop_diagnostics(self) -> dict[str, float]:
        """Per-task means over the gradient steps since the last call: ``learner/<task>/
        alpha``, ``entropy`` (of the squashed action in ``[-1, 1]``), ``q`` (of the sampled
        actions), ``td_error`` (mean |δ| of the twin critics), and the replay's size; with FAMO
        each task's weight in the critics' loss now (``famo_weight``, summing to 1); a
        sharded replay's losses and waits (:func:`mtrl.replay.replay_metrics`)."""
        out = self.diagnostics.pop()
        self._warn_at_support_edge(out)
        for k, name in enumerate(self.task_names):
            out[f"learner/{name}/replay_transitions"] = float(self.replays[k].sampler.count)
        out.update(replay_metrics(self.replays))
        if self.famo is not None:
            for name, weight in zip(self.task_names, self.famo.weights.tolist(), strict=True):
                out[f"learner/{name}/famo_weight"] = weight
        return out

    def _warn_at_support_edge(self, diag: dict[str, float]) -> None:
        """Once per task and end: a categorical critic's mean ``Q`` at an end of its support
        (:func:`~mtrl.algorithms.sac.categorical.edge_reached`) means its targets are clipped
        there: say so, naming the setting to widen, rather than learn a wrong value silently."""
        sac = self.sac
        if sac.critic != "categorical":
            return
        for name in self.task_names:
            q = diag.get(f"learner/{name}/q")
            if q is None:  # not sampled since the last record
                continue
            end = categorical.edge_reached(q, sac.v_min, sac.v_max, sac.num_bins)
            if end is None or (name, end) in self._edges_told:
                continue
            self._edges_told.add((name, end))
            bound = sac.v_max if end == "v_max" else sac.v_min
            print(
                f"WARNING: task {name!r}: the categorical critic's mean Q ({q:.4g}) is within a "
                f"bin of learner.sac.{end} ({bound:g}): soft targets beyond it are clipped, so "
                f"this task's values are not learned; widen learner.sac.v_min/v_max to bound "
                f"its returns",
                flush=True,
            )

    # -- checkpoints (what they hold: mtrl/algorithms/sac/state.py) ------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimisers, temperatures, counters and, with ``checkpoint.replay``, each
        task's replay (tensors sharing the replay's memory: save before the next update)."""
        return capture(self)

    def load_state_dict(self, state: dict[str, Any], quiet: bool = False) -> None:
        """Continue from :meth:`state_dict`; without replay contents, say so (unless
        ``quiet``) and refill."""
        restore(self, state, quiet)
