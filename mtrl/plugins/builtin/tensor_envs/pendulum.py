"""Pendulum-v1 in tensors: gymnasium's swing-up equations, batched (no termination)."""

from __future__ import annotations

import math

import torch

from mtrl.plugins.builtin.tensor_envs.base import TensorBatchEnv
from mtrl.plugins.builtin.tensor_envs.spaces import (
    PENDULUM_MAX_SPEED,
    PENDULUM_MAX_TORQUE,
    env_spaces,
)

MAX_SPEED = PENDULUM_MAX_SPEED
MAX_TORQUE = PENDULUM_MAX_TORQUE
DT = 0.05
G = 10.0
M = 1.0
L = 1.0


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """Angle in [-pi, pi) (gymnasium's ``angle_normalize``, Python-style modulo)."""
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


class Pendulum(TensorBatchEnv):
    """State ``(theta, theta_dot)``; observation ``(cos, sin, theta_dot)``; reward -cost."""

    gym_id = "Pendulum-v1"
    default_max_episode_steps = 200
    reset_low = (-math.pi, -1.0)
    reset_high = (math.pi, 1.0)
    single_observation_space, single_action_space = env_spaces(gym_id)

    def dynamics(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        th, thdot = state.unbind(-1)
        # gymnasium's torque terms are float32 (the action's dtype) whatever the state's.
        u = torch.clamp(actions[..., 0].float(), -MAX_TORQUE, MAX_TORQUE)
        u_cost = (0.001 * (u**2)).to(state.dtype)
        u_acc = (3.0 / (M * L**2) * u).to(state.dtype)
        costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + u_cost
        newthdot = thdot + (3 * G / (2 * L) * torch.sin(th) + u_acc) * DT
        newthdot = torch.clamp(newthdot, -MAX_SPEED, MAX_SPEED)
        newth = th + newthdot * DT
        terminated = torch.zeros_like(th, dtype=torch.bool)
        return torch.stack((newth, newthdot), -1), -costs, terminated

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        th, thdot = state.unbind(-1)
        return torch.stack((torch.cos(th), torch.sin(th), thdot), -1).float()
