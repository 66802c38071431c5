"""TensorBatchEnv: N copies of an env whose whole state is a few tensors on one device.

Two faces over one implementation:

* the **tensor API** for Anakin (:meth:`TensorBatchEnv.reset_tensor`,
  :meth:`TensorBatchEnv.step_tensor`): actions in, observations, rewards and flags out, all on
  the env's device, with no host sync;
* the standard **numpy** :class:`~mtrl.plugins.BatchEnv` API (``reset``/``step``), so the same
  env runs in Sebulba actors and passes :func:`mtrl.testing.check_env`.

Both follow the batch-env contract's next-step auto-reset (:mod:`mtrl.plugins.batch_env`): the
step after ``terminated or truncated`` ignores the action, puts a fresh start state in, and
returns its observation with reward 0 and both flags false. It is written with ``torch.where``
masks, never a Python branch on tensor values, so :meth:`TensorBatchEnv.transition` is a pure
function that ``torch.compile`` and CUDA graphs take whole.

Randomness (start states only: the dynamics are deterministic) comes from a ``torch.Generator``
on the env's device seeded with ``seed``: the same seed and actions give the same trajectory
on one device, but not the same numbers as gymnasium's numpy generator. One generator serves
the whole batch (the contract's "copy ``i`` uses ``seed + i``" does not apply). Start states
are drawn for every copy on every step and kept only where a copy resets, so the draw does not
depend on the data (no sync) and the stream is a function of ``(seed, num_envs)`` alone.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from mtrl.plugins.batch_env import BatchEnv, StepBatch

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def canonical_device(device: str | torch.device) -> torch.device:
    """``device`` with its index filled in (``cuda`` → ``cuda:0``), so devices compare equal."""
    device = torch.device(device)
    if device.index is None and device.type != "cpu":
        return torch.empty(0, device=device).device
    return device


class TensorStep(NamedTuple):
    """One step of the tensor API: every field has leading dim ``num_envs`` and is on device."""

    obs: torch.Tensor  # [N, *obs] float32
    reward: torch.Tensor  # [N] float32
    terminated: torch.Tensor  # [N] bool
    truncated: torch.Tensor  # [N] bool


class Transition(NamedTuple):
    """What the pure :meth:`TensorBatchEnv.transition` returns: new env state and the step."""

    state: torch.Tensor  # [N, state_dim] physical state, env dtype
    steps: torch.Tensor  # [N] int32, steps since the copy's last reset
    done: torch.Tensor  # [N] bool, terminated | truncated: the next step resets this copy
    obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor


class TensorBatchEnv(BatchEnv):
    """Base of tensor-native envs; subclasses give spaces, start ranges and pure dynamics.

    ``device`` (any torch device name), ``dtype`` (``"float32"`` or ``"float64"``: the precision
    of the physical state and the dynamics; observations and rewards are always float32, as the
    spaces say), ``max_episode_steps`` (time limit, gymnasium's by default) and ``compile``
    (wrap :meth:`transition` in ``torch.compile`` for :meth:`step_tensor` and :meth:`step`;
    Anakin compiles whole unrolls itself instead) are the constructor's keyword arguments.
    """

    #: gymnasium id whose dynamics this env reproduces.
    gym_id: ClassVar[str]
    default_max_episode_steps: ClassVar[int]
    #: per-dimension uniform start-state range.
    reset_low: ClassVar[tuple[float, ...]]
    reset_high: ClassVar[tuple[float, ...]]
    #: gymnasium draws some start states in float32 (Acrobot): round ours the same way.
    reset_in_float32: ClassVar[bool] = False

    def __init__(
        self,
        num_envs: int,
        seed: int = 0,
        *,
        device: str | torch.device = "cpu",
        dtype: str = "float32",
        max_episode_steps: int | None = None,
        compile: bool = False,
    ) -> None:
        if num_envs <= 0:
            raise ValueError(f"num_envs must be positive, got {num_envs}")
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
        self.num_envs = num_envs
        self.device = canonical_device(device)
        self.dtype = _DTYPES[dtype]
        self.max_episode_steps = int(max_episode_steps or self.default_max_episode_steps)
        if self.max_episode_steps <= 0:
            raise ValueError(f"max_episode_steps must be positive, got {max_episode_steps}")
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(seed))
        kw = {"device": self.device, "dtype": self.dtype}
        self._reset_low = torch.tensor(self.reset_low, **kw)
        self._reset_span = torch.tensor(self.reset_high, **kw) - self._reset_low
        self.state = torch.zeros(num_envs, len(self.reset_low), **kw)
        self.steps = torch.zeros(num_envs, dtype=torch.int32, device=self.device)
        self.prev_done = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self._transition = self.transition
        if compile:
            self._transition = torch.compile(self.transition, dynamic=False)

    # -- what a subclass implements (pure functions of tensors) ---------------------------------

    def dynamics(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of every copy: ``(next_state, reward, terminated)``, no reset, no limit."""
        raise NotImplementedError

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """The float32 observation ``[N, *obs]`` of physical states ``[N, state_dim]``."""
        raise NotImplementedError

    # -- the tensor API -------------------------------------------------------------------------

    def sample_start(self) -> torch.Tensor:
        """Fresh start states ``[N, state_dim]`` for every copy, from the env's generator."""
        return self.sample_starts(1)[0]

    def sample_starts(self, steps: int) -> torch.Tensor:
        """Start states ``[steps, N, state_dim]`` for ``steps`` consecutive steps at once.

        On CPU one draw of ``steps`` rows gives the same numbers as ``steps`` draws of one row,
        so a whole unroll's draws can be made up front (outside a compiled graph).
        """
        u = torch.rand(
            (steps, *self.state.shape),
            generator=self.generator,
            device=self.device,
            dtype=self.dtype,
        )
        start = self._reset_low + u * self._reset_span
        return start.float().to(self.dtype) if self.reset_in_float32 else start

    def transition(
        self,
        state: torch.Tensor,
        steps: torch.Tensor,
        prev_done: torch.Tensor,
        actions: torch.Tensor,
        start: torch.Tensor,
    ) -> Transition:
        """Pure step with the time limit and next-step auto-reset; ``start`` replaces done rows."""
        next_state, reward, terminated = self.dynamics(state, actions)
        steps = steps + 1
        truncated = steps >= self.max_episode_steps
        next_state = torch.where(prev_done.unsqueeze(-1), start, next_state)
        steps = torch.where(prev_done, torch.zeros_like(steps), steps)
        reward = torch.where(prev_done, torch.zeros_like(reward), reward).float()
        terminated = terminated & ~prev_done
        truncated = truncated & ~prev_done
        done = terminated | truncated
        return Transition(
            next_state, steps, done, self.observe(next_state), reward, terminated, truncated
        )

    def reset_tensor(self) -> torch.Tensor:
        """Reset every copy (continuing the generator's stream); first observations on device."""
        self.state = self.sample_start()
        self.steps = torch.zeros_like(self.steps)
        self.prev_done = torch.zeros_like(self.prev_done)
        return self.observe(self.state)

    def step_tensor(self, actions: torch.Tensor) -> TensorStep:
        """Step every copy with env-space actions on the env's device (Discrete: int index)."""
        out = self._transition(self.state, self.steps, self.prev_done, actions, self.sample_start())
        self.state, self.steps, self.prev_done = out.state, out.steps, out.done
        return TensorStep(out.obs, out.reward, out.terminated, out.truncated)

    def get_state(self) -> dict[str, torch.Tensor]:
        """The raw physical state ``[N, state_dim]``, step counters and pending-reset flags."""
        return {"state": self.state, "steps": self.steps, "prev_done": self.prev_done}

    def set_state(
        self,
        state: Any,
        steps: Any | None = None,
        prev_done: Any | None = None,
    ) -> None:
        """Overwrite the physical state (``[N, state_dim]``; gymnasium's ``unwrapped.state``).

        ``steps`` (default: unchanged) and ``prev_done`` (default: all false) set the time-limit
        counters and whether each copy's next step is a reset step.
        """
        state = torch.as_tensor(state, dtype=self.dtype, device=self.device)
        if state.shape != self.state.shape:
            raise ValueError(f"state must have shape {tuple(self.state.shape)}, got {state.shape}")
        self.state = state.clone()
        if steps is not None:
            self.steps = (
                torch.as_tensor(steps, device=self.device)
                .to(torch.int32)
                .expand_as(self.steps)
                .clone()
            )
        flags = torch.zeros_like(self.prev_done) if prev_done is None else prev_done
        self.prev_done = (
            torch.as_tensor(flags, device=self.device)
            .to(torch.bool)
            .expand_as(self.prev_done)
            .clone()
        )

    # -- the numpy BatchEnv API -----------------------------------------------------------------

    def reset(self) -> np.ndarray:
        return self.reset_tensor().cpu().numpy()

    def step(self, actions: Any) -> StepBatch:
        space = self.single_action_space
        dtype = torch.int64 if isinstance(space, gym.spaces.Discrete) else self.dtype
        a = torch.as_tensor(np.asarray(actions), device=self.device).to(dtype)
        expected = (self.num_envs, *space.shape)
        if tuple(a.shape) != expected:
            raise ValueError(f"{self.gym_id}: actions must have shape {expected}, got {a.shape}")
        out = self.step_tensor(a)
        return StepBatch(
            obs=out.obs.cpu().numpy(),
            reward=out.reward.cpu().numpy(),
            terminated=out.terminated.cpu().numpy(),
            truncated=out.truncated.cpu().numpy(),
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.gym_id}, num_envs={self.num_envs}, "
            f"device={self.device}, dtype={self.dtype})"
        )
