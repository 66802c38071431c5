"""Actions for unroll rows, and the recurrent core states of env copies kept between steps.

Whoever runs inference for actors — the serial pool, the central inference server, an actor
with its own copy of the policy — calls :meth:`CoreStates.act` with the rows it serves:
``(key, buffer, t)``, where ``key`` names the actor (one set of ``N`` env copies). With a
feed-forward model that is one batched :meth:`~mtrl.actors.inference.InferenceModel.act` over
the rows' observations. With a recurrent model each key's states ``[N, S]`` live here, on the
inference device, and every row:

* at ``t == 0`` the states are copied into the buffer's ``core_state`` (the unroll's initial
  state, which the learner runs its core from);
* the rows' states go through one batched
  :meth:`~mtrl.actors.inference.InferenceModel.act_recurrent`;
* a copy that acted on a reset step (``valid[t]`` false: its env ignores the action and starts a
  new episode) gets a zero state, which the first row of its new episode then reads — exactly
  where :func:`mtrl.learner.recurrent.sequence_resets` resets the learner's sequence.

A new key starts from zeros, which is right because a new actor resets its envs. So is a
resumed run: the checkpoint holds the model, not the actors' live states; resumed actors build
fresh envs and their cores start from zeros, as at the start of any episode.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np
import torch

from mtrl.actors.inference import InferenceModel
from mtrl.actors.unroll import UnrollBuffer, obs_row
from mtrl.learner.recurrent import reset_state

#: One row to act on: ``(key of the actor, its unroll buffer, step t)``.
Row = tuple[Hashable, UnrollBuffer, int]


def concat_rows(parts: list[Any]) -> Any:
    """Observation rows of several buffers side by side (arrays, or dicts of arrays)."""
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], dict):
        return {k: concat_rows([p[k] for p in parts]) for k in parts[0]}
    return np.concatenate(parts)


class CoreStates:
    """Per-actor core states of a recurrent model (nothing, for a feed-forward one)."""

    def __init__(self, inference: InferenceModel) -> None:
        self.inference = inference
        self._states: dict[Hashable, torch.Tensor] = {}

    def act(self, task: int, rows: Sequence[Row]) -> tuple[np.ndarray, np.ndarray, int]:
        """Raw actions and log-probs for ``rows`` (all of task ``task``), concatenated in their
        order, and the weights version; keeps each key's states (see the module docstring)."""
        obs = concat_rows([obs_row(buf.obs, t) for _, buf, t in rows])
        inference = self.inference
        if not inference.state_size:
            return inference.act(task, obs)
        states = [self._get(key, buf) for key, buf, _ in rows]
        for state, (_, buf, t) in zip(states, rows, strict=True):
            if t == 0:
                if buf.core_state is None:
                    raise ValueError(
                        f"task {task}: the model has a recurrent core but this unroll buffer "
                        "has no core_state; allocate it with unroll_fields(..., "
                        "state_size=inference.state_size)"
                    )
                buf.core_state[...] = state.cpu().numpy()
        state = states[0] if len(states) == 1 else torch.cat(states)
        raw, logp, version, nxt = inference.act_recurrent(task, obs, state)
        valid = np.concatenate([buf.valid[t] for _, buf, t in rows])
        nxt = reset_state(nxt, torch.as_tensor(~valid, device=nxt.device))
        start = 0
        for key, buf, _ in rows:
            self._states[key] = nxt[start : start + buf.num_envs]
            start += buf.num_envs
        return raw, logp, version

    def act_into(self, key: Hashable, buf: UnrollBuffer, t: int) -> None:
        """Act on one row and write its actions, log-probs and weights version into ``buf``
        at step ``t`` (an actor serving only itself: the serial pool, a policy copy)."""
        raw, logp, version = self.act(buf.task, [(key, buf, t)])
        buf.actions[t] = raw
        buf.behaviour_logp[t] = logp
        buf.versions[t] = version

    def _get(self, key: Hashable, buf: UnrollBuffer) -> torch.Tensor:
        state = self._states.get(key)
        if state is None:
            state = torch.zeros(
                buf.num_envs, self.inference.state_size, device=self.inference.device
            )
        return state

    def forget(self, key: Hashable) -> None:
        """Drop an actor's states (it stopped; a new actor never reuses its key)."""
        self._states.pop(key, None)

    def retain(self, keys: Iterable[Hashable]) -> None:
        """Drop the states of every actor not in ``keys`` (those still served)."""
        keep = set(keys)
        for key in [k for k in self._states if k not in keep]:
            del self._states[key]

    def __len__(self) -> int:
        return len(self._states)
