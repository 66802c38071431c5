"""AnakinRunner: one task's tensor env and rollout, entirely on the env's device.

The Anakin counterpart of the serial Sebulba actor (Podracer, Hessel et al. 2021): the env
lives on the learner's device, the policy acts on device tensors, and
:meth:`AnakinRunner.collect` hands the learner a :class:`~mtrl.learner.batch.TaskBatch` with no
host copy. Its semantics are those of the numpy path (``mtrl.actors``: the env's numpy API
stepped into an unroll buffer, actions sampled from the same model, ``task_batch``):
``obs`` has ``T + 1`` rows and the last one is carried over as row 0 of the next unroll;
``valid`` is false on reset steps; rewards are multiplied by ``reward_scale``; raw policy
actions and their float32 log-probs are stored; returns are counted unscaled. A test checks
that both paths give identical batches from identical seeds. A recurrent model's core states
stay on the device too: the batch carries each copy's state at the unroll's start
(``core_state``), and a copy's state is zeroed after its reset steps, as the actors'
(:mod:`mtrl.actors.core_states`) are.

``compile=True`` (or a ``torch.compile`` mode) compiles a whole unroll — ``T`` policy
forwards, samplings, env transitions and the episode bookkeeping — into one graph. That is
what pays on CPU (per-step graphs cost more in guard checks than they save); it takes a minute
to compile on a small CPU, so it is off by default. The env's start-state draws for the unroll
are made up front, outside the graph, from the env's own generator. With
``"reduce-overhead"`` (CUDA graphs) the batch is cloned out of the graph's static buffers.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from mtrl.anakin.actions import DeviceActionMap
from mtrl.anakin.episodes import DeviceEpisodeTracker, accumulate
from mtrl.learner.batch import TaskBatch
from mtrl.learner.recurrent import reset_state
from mtrl.plugins.builtin.tensor_envs.base import TensorBatchEnv, canonical_device


class _Step(NamedTuple):
    """Everything one rollout step produces (device tensors)."""

    raw: torch.Tensor
    logp: torch.Tensor
    obs: torch.Tensor
    reward: torch.Tensor  # scaled
    terminated: torch.Tensor
    truncated: torch.Tensor
    valid: torch.Tensor
    state: torch.Tensor
    core: torch.Tensor  # the policy's recurrent state for the next row ([N, 0]: feed-forward)
    steps: torch.Tensor
    done: torch.Tensor
    ep_return: torch.Tensor  # return and length up to this step (meaningful where done)
    ep_length: torch.Tensor
    running_return: torch.Tensor
    running_length: torch.Tensor


_STACKED = (
    "raw",
    "logp",
    "reward",
    "terminated",
    "truncated",
    "valid",
    "done",
    "ep_return",
    "ep_length",
)


class AnakinRunner:
    """Steps ``env`` ``unroll_length`` times per :meth:`collect` with the model's policy.

    Same shape as the Sebulba runners, for the trainer: ``collect(model, version)``, the
    ``env_steps`` counter (reset steps included) and ``episodes.drain()`` (returns, lengths,
    successes; the only host sync). ``collect`` returns a :class:`TaskBatch` (not an unroll buffer).
    """

    def __init__(
        self,
        task: int,
        env: TensorBatchEnv,
        unroll_length: int,
        reward_scale: float,
        *,
        compile: bool | str = False,
    ) -> None:
        if not isinstance(env, TensorBatchEnv):
            raise TypeError(
                f"task {task}: Anakin needs a tensor-native env (mtrl.plugins.builtin."
                f"tensor_envs, ids 'tensor/...'), got {type(env).__name__}"
            )
        if unroll_length <= 0:
            raise ValueError(f"unroll_length must be positive, got {unroll_length}")
        self.task = task
        self.env = env
        self.unroll_length = unroll_length
        self.reward_scale = float(reward_scale)
        self.device = env.device
        self.episodes = DeviceEpisodeTracker(
            env.num_envs, env.device, capacity=max(2 * unroll_length * env.num_envs, 1 << 16)
        )
        self.env_steps = 0
        self._env_actions = DeviceActionMap(env.single_action_space, env.device)
        self._obs = env.reset_tensor()
        self._core: torch.Tensor | None = None  # made from the model at the first collect
        self._run_unroll = self._unroll
        mode = compile if isinstance(compile, str) else None
        self._cuda_graphs = mode == "reduce-overhead"
        if compile:
            self._run_unroll = torch.compile(self._unroll, mode=mode, dynamic=False)

    def _rollout_step(
        self,
        model: nn.Module,
        obs: torch.Tensor,
        state: torch.Tensor,
        core: torch.Tensor,
        steps: torch.Tensor,
        prev_done: torch.Tensor,
        start: torch.Tensor,
        running_return: torch.Tensor,
        running_length: torch.Tensor,
    ) -> _Step:
        """Act on ``obs`` and step the env: a pure function of its tensor arguments."""
        task, env = self.task, self.env
        mask = model.action_mask(task, obs) if model.has_action_mask(task) else None
        h, core = model.step(task, obs, core)
        dist = model.policy(task, h, mask)
        raw = dist.sample()
        logp = dist.log_prob(raw).float()
        out = env.transition(state, steps, prev_done, self._env_actions(raw), start)
        valid = ~prev_done
        core = reset_state(core, prev_done)  # a reset step: the next row starts an episode
        ep_return, ep_length, running_return, running_length = accumulate(
            running_return, running_length, out.reward, out.done, valid
        )
        return _Step(
            raw=raw,
            logp=logp,
            obs=out.obs,
            reward=out.reward * self.reward_scale,
            terminated=out.terminated,
            truncated=out.truncated,
            valid=valid,
            state=out.state,
            core=core,
            steps=out.steps,
            done=out.done,
            ep_return=ep_return,
            ep_length=ep_length,
            running_return=running_return,
            running_length=running_length,
        )

    @torch.no_grad()
    def _unroll(
        self,
        model: nn.Module,
        obs: torch.Tensor,
        state: torch.Tensor,
        core: torch.Tensor,
        steps: torch.Tensor,
        prev_done: torch.Tensor,
        starts: torch.Tensor,
        running_return: torch.Tensor,
        running_length: torch.Tensor,
    ) -> tuple[dict[str, torch.Tensor], _Step]:
        """``T`` rollout steps: the stacked per-step fields and the last step (carried state)."""
        rows: list[_Step] = []
        first = obs
        for t in range(starts.shape[0]):
            s = self._rollout_step(
                model,
                obs,
                state,
                core,
                steps,
                prev_done,
                starts[t],
                running_return,
                running_length,
            )
            obs, state, core, steps, prev_done = s.obs, s.state, s.core, s.steps, s.done
            running_return, running_length = s.running_return, s.running_length
            rows.append(s)
        stacked = {f: torch.stack([getattr(r, f) for r in rows]) for f in _STACKED}
        stacked["obs"] = torch.stack([first, *(r.obs for r in rows)])
        return stacked, rows[-1]

    def collect(self, model: nn.Module, version: int) -> TaskBatch:
        """One unroll of ``T`` steps of every copy as a :class:`TaskBatch` on the env's device.

        ``model`` is the learner's :class:`~mtrl.learner.model.MultiTaskModel` (on the env's
        device); ``version`` is stamped on the batch as the policy version that acted.
        """
        env, ep = self.env, self.episodes
        model_device = canonical_device(next(model.parameters()).device)
        if model_device != self.device:
            raise ValueError(
                f"task {self.task}: the model is on {model_device} but the env on {self.device}; "
                "Anakin needs both on one device (env_kwargs device=...)"
            )
        if self._core is None:
            self._core = model.initial_state(env.num_envs, self.device)
        core = self._core
        if self._cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()
        rows, last = self._run_unroll(
            model,
            self._obs,
            env.state,
            core,
            env.steps,
            env.prev_done,
            env.sample_starts(self.unroll_length),
            ep.running_return,
            ep.running_length,
        )
        if self._cuda_graphs:  # outputs live in static buffers the next replay overwrites
            rows = {k: v.clone() for k, v in rows.items()}
            last = _Step(*(v.clone() for v in last))
        env.state, env.steps, env.prev_done = last.state, last.steps, last.done
        ep.running_return, ep.running_length = last.running_return, last.running_length
        self._obs = last.obs
        self._core = last.core
        self.env_steps += self.unroll_length * env.num_envs
        ep.record(rows["done"], rows["ep_return"], rows["ep_length"])
        return TaskBatch(
            task=self.task,
            obs=rows["obs"],
            actions=rows["raw"],
            behaviour_logp=rows["logp"],
            rewards=rows["reward"],
            terminated=rows["terminated"],
            truncated=rows["truncated"],
            valid=rows["valid"],
            policy_version=version,
            core_state=core if model.recurrent else None,
        )

    def close(self) -> None:
        self.env.close()
