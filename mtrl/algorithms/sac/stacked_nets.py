"""SAC's networks as the stacked step runs them: per group of same-shaped tasks, one batched
call per layer; the twin critics as one ensemble; the shared torsos once over every group.

A group whose tasks have float vector observations (the encoders only flatten them) runs its
encoders as an :class:`~mtrl.learner.stacked.MLPStack` over the ``[K_g, m, obs]`` block; any
other encoder (images, scaled integers, one-hot inputs, ``critic_action: hidden``) is a group of
its own task and runs as its module, on its rows. Heads are always stacked (a ``Linear`` each).
The stacks alias the per-task modules' parameters (:class:`~mtrl.learner.stacked.LinearStack`),
so the actors, checkpoints and state dicts see the modules as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from mtrl.algorithms.sac.obs_norm import stacked_normalizer
from mtrl.algorithms.sac.stacked_batch import GroupSpec
from mtrl.learner.stacked import LinearStack, MLPStack, stack_signature

__all__ = ["Critics", "Frozen", "Policy", "stackable_encoder"]


def stackable_encoder(encoder: nn.Module, prep: str) -> bool:
    """Whether ``encoder`` is an MLP on its input only flattened (``prep``: the attribute
    holding its input preparation, ``prep`` for the policy's, ``scale`` for a critic's
    observation-and-action encoder): float vector observations."""
    if not hasattr(encoder, "mlp") or stack_signature(encoder.mlp) is None:
        return False
    return getattr(getattr(encoder, prep, None), "inv_high", "absent") is None


class Frozen:
    """Within the block, ``params`` take no gradient (each put back as it was after)."""

    def __init__(self, params: Sequence[torch.Tensor], on: bool) -> None:
        self.params = list(params) if on else []
        self.was: list[bool] = []

    def __enter__(self) -> None:
        self.was = [p.requires_grad for p in self.params]
        for p in self.params:
            p.requires_grad_(False)

    def __exit__(self, *exc: object) -> None:
        for p, was in zip(self.params, self.was, strict=True):
            p.requires_grad_(was)


def _aliased(stacks: Sequence[nn.Module], modules: Sequence[nn.Module]) -> set[int]:
    """Ids of the stacks' own parameters and of the member modules' (their aliases)."""
    ids = {id(p) for s in stacks for p in s.parameters()}
    return ids | {id(p) for m in modules for p in m.parameters()}


class Policy:
    """The policy's encoders and heads per group; the torso is the model's own."""

    def __init__(self, model: nn.Module, groups: Sequence[GroupSpec], stacked: list[bool]):
        self.model = model
        self.groups = list(groups)
        self.encoders: list[MLPStack | None] = []
        self.norms: list[Callable[[torch.Tensor], torch.Tensor] | None] = []
        """Per group: the normalisation of its raw observations before a stacked encoder
        (``learner.sac.normalize_obs``), or None."""
        self.heads: list[LinearStack] = []
        members: list[nn.Module] = []
        for g, stack in zip(groups, stacked, strict=True):
            encs = [model.encoders[t] for t in g.tasks]
            self.encoders.append(MLPStack([e.mlp for e in encs]) if stack else None)
            self.norms.append(stacked_normalizer(encs) if stack else None)
            members += [e.mlp for e in encs] if stack else []
            heads = [model.policy_heads[t] for t in g.tasks]
            layers = [[h.mean, h.log_std] if g.box else [h.linear] for h in heads]
            self.heads.append(LinearStack(layers))
            members += heads
        stacks = [s for s in self.encoders if s is not None] + self.heads
        self.own = [p for s in stacks for p in s.parameters()]
        self.aliased = _aliased(stacks, members)

    def __call__(self, obs: Sequence[torch.Tensor], rows: torch.Tensor) -> list[torch.Tensor]:
        """Each group's head output ``[K_g, M, out]`` at its ``obs [K_g, M, o]`` (``rows``:
        each torso row's task, for a task-conditioned torso)."""
        hs = [self._encode(i, o) for i, o in enumerate(obs)]
        sizes = [h.shape[0] * h.shape[1] for h in hs]
        flat = torch.cat([h.reshape(n, -1) for h, n in zip(hs, sizes, strict=True)])
        out = self.model.run_torso(flat, rows).split(sizes)
        return [
            head(x.reshape(h.shape[0], h.shape[1], -1))
            for head, x, h in zip(self.heads, out, hs, strict=True)
        ]

    def _encode(self, i: int, obs: torch.Tensor) -> torch.Tensor:
        stack, g, norm = self.encoders[i], self.groups[i], self.norms[i]
        if stack is not None:
            return stack(norm(obs) if norm is not None else obs)
        k, m = obs.shape[0], obs.shape[1]
        parts = [
            self.model.encoders[t](obs[j].reshape(m, *g.obs_shape)) for j, t in enumerate(g.tasks)
        ]
        return torch.stack(parts).reshape(k, m, -1)


class Critics:
    """Both critics of a :class:`~mtrl.algorithms.sac.networks.TwinCritic` as one ensemble:
    per group, encoders and heads stacked over ``[2 K_g]`` members (critic 1's tasks, then
    critic 2's); the torsos stacked over ``[2]`` where they are plain MLPs."""

    def __init__(self, twin: nn.Module, groups: Sequence[GroupSpec], stacked: list[bool]):
        q1, q2 = twin.q1, twin.q2
        self.twin = (q1, q2)
        self.groups = list(groups)
        self.encoders: list[MLPStack | None] = []
        self.norms: list[Callable[[torch.Tensor], torch.Tensor] | None] = []
        """Per group: the normalisation of its raw observations before a stacked encoder
        (``learner.sac.normalize_obs``; both critics share each task's), or None."""
        self.heads: list[LinearStack] = []
        members: list[nn.Module] = []
        for g, stack in zip(groups, stacked, strict=True):
            mlps = [q.encoders[t].mlp for q in (q1, q2) for t in g.tasks] if stack else []
            self.encoders.append(MLPStack(mlps) if stack else None)
            encs = [q1.encoders[t] for t in g.tasks]
            self.norms.append(stacked_normalizer(encs) if stack else None)
            heads = [q.heads[t] for q in (q1, q2) for t in g.tasks]
            self.heads.append(LinearStack([[h] for h in heads]))
            members += mlps + heads
        self.torsos = [q1.torso, q2.torso]
        self.conditioned = q1.conditioned
        plain = not self.conditioned and stack_signature(q1.torso) is not None
        self.torso_stack = MLPStack(self.torsos) if plain else None
        if self.torso_stack is not None:
            members += self.torsos
        stacks = [s for s in self.encoders if s is not None] + self.heads
        stacks += [self.torso_stack] if self.torso_stack is not None else []
        own = [p for s in stacks for p in s.parameters()]
        aliased = _aliased(stacks, members)
        self.unstacked = [p for q in (q1, q2) for p in q.parameters() if id(p) not in aliased]
        """The critics' parameters outside the stacks (unstacked encoders, action joins, a
        conditioned torso)."""
        self.params = own + self.unstacked
        """What the critics' optimiser steps (the target critics' Polyak average follows
        their copy's, in the same order)."""
        self.shared = (
            list(self.torso_stack.parameters())
            if self.torso_stack is not None
            else [*q1.shared_parameters(), *q2.shared_parameters()]
        )
        """The parameters every task's loss reaches (what combined task gradients act on)."""

    def __call__(
        self,
        inputs: Sequence[tuple[torch.Tensor, torch.Tensor | None]],
        rows: torch.Tensor,
        frozen: bool,
    ) -> list[torch.Tensor]:
        """Each group's ``Q`` ``[2, K_g, M, out]`` (``out`` 1 for Box, ``n`` for Discrete)
        at its observations ``[K_g, M, o]`` and squashed Box actions ``[K_g, M, a]`` (None
        for Discrete); ``frozen``: no gradient reaches the critics' parameters."""
        with Frozen(self.unstacked, frozen):
            hs = [self._encode(i, o, a, frozen) for i, (o, a) in enumerate(inputs)]
            sizes = [h.shape[0] // 2 * h.shape[1] for h in hs]
            flat = torch.cat([h.reshape(2, n, -1) for h, n in zip(hs, sizes, strict=True)], 1)
            if self.torso_stack is not None:
                out = self.torso_stack(flat, frozen)
            elif self.conditioned:
                out = torch.stack([t(flat[i], rows) for i, t in enumerate(self.torsos)])
            else:
                out = torch.stack([t(flat[i]) for i, t in enumerate(self.torsos)])
        parts = out.split(sizes, dim=1)
        return [
            head(x.reshape(h.shape[0], h.shape[1], -1), frozen).reshape(
                2, h.shape[0] // 2, h.shape[1], -1
            )
            for head, x, h in zip(self.heads, parts, hs, strict=True)
        ]

    def _encode(
        self, i: int, obs: torch.Tensor, action: torch.Tensor | None, frozen: bool
    ) -> torch.Tensor:
        """``[2 K_g, M, e]``: critic 1's rows of the group's tasks, then critic 2's."""
        stack, g, norm = self.encoders[i], self.groups[i], self.norms[i]
        if stack is not None:
            obs = norm(obs) if norm is not None else obs
            x = obs if action is None else torch.cat([obs, action.to(obs.dtype)], dim=-1)
            return stack(x.repeat(2, 1, 1), frozen)
        m = obs.shape[1]
        parts = []
        for q in self.twin:
            for j, t in enumerate(g.tasks):
                o = obs[j].reshape(m, *g.obs_shape)
                a = None if action is None else action[j]
                if q.action_at_input[t]:
                    parts.append(q.encoders[t](o, a))
                else:
                    x = q.encoders[t](o)
                    parts.append(q.joins[t](x, a.to(x.dtype)) if q.continuous[t] else x)
        return torch.stack(parts)
