"""MountainCar-v0 and MountainCarContinuous-v0 in tensors: gymnasium's equations, batched.

Gymnasium's continuous version keeps its state in float32 between steps; so does ours (the
state is rounded to float32 after each step whatever ``dtype`` says), so trajectories stay close.
"""

from __future__ import annotations

import torch

from mtrl.plugins.builtin.tensor_envs.base import TensorBatchEnv
from mtrl.plugins.builtin.tensor_envs.spaces import (
    MOUNTAIN_CAR_MAX_POSITION,
    MOUNTAIN_CAR_MAX_SPEED,
    MOUNTAIN_CAR_MIN_POSITION,
    env_spaces,
)

MIN_POSITION = MOUNTAIN_CAR_MIN_POSITION
MAX_POSITION = MOUNTAIN_CAR_MAX_POSITION
MAX_SPEED = MOUNTAIN_CAR_MAX_SPEED


def _move(
    position: torch.Tensor, velocity: torch.Tensor, dv: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Shared kinematics: accelerate, clip speed, move, clip position, stop at the left wall."""
    velocity = torch.clamp(velocity + dv, -MAX_SPEED, MAX_SPEED)
    position = torch.clamp(position + velocity, MIN_POSITION, MAX_POSITION)
    stopped = (position == MIN_POSITION) & (velocity < 0)
    return position, torch.where(stopped, torch.zeros_like(velocity), velocity)


class MountainCar(TensorBatchEnv):
    """State ``(position, velocity)``; actions push left, not at all, right; reward -1 a step."""

    gym_id = "MountainCar-v0"
    default_max_episode_steps = 200
    reset_low = (-0.6, 0.0)
    reset_high = (-0.4, 0.0)
    single_observation_space, single_action_space = env_spaces(gym_id)
    force = 0.001
    gravity = 0.0025
    goal_position = 0.5
    goal_velocity = 0.0

    def dynamics(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        position, velocity = state.unbind(-1)
        push = (actions - 1).to(state.dtype) * self.force
        position, velocity = _move(
            position, velocity, push + torch.cos(3 * position) * (-self.gravity)
        )
        terminated = (position >= self.goal_position) & (velocity >= self.goal_velocity)
        reward = torch.full_like(position, -1.0)
        return torch.stack((position, velocity), -1), reward, terminated

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        return state.float()


class MountainCarContinuous(TensorBatchEnv):
    """Force in [-1, 1]; reward 100 at the goal minus 0.1 x action² (the unclipped action)."""

    gym_id = "MountainCarContinuous-v0"
    default_max_episode_steps = 999
    reset_low = (-0.6, 0.0)
    reset_high = (-0.4, 0.0)
    single_observation_space, single_action_space = env_spaces(gym_id)
    power = 0.0015
    goal_position = 0.45
    goal_velocity = 0.0

    def dynamics(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        position, velocity = state.unbind(-1)
        action = actions[..., 0].to(state.dtype)
        force = torch.clamp(action, -1.0, 1.0)
        position, velocity = _move(
            position, velocity, force * self.power - 0.0025 * torch.cos(3 * position)
        )
        terminated = (position >= self.goal_position) & (velocity >= self.goal_velocity)
        reward = torch.where(terminated, 100.0, 0.0).to(state.dtype) - torch.square(action) * 0.1
        next_state = torch.stack((position, velocity), -1).float().to(state.dtype)
        return next_state, reward, terminated

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        return state.float()
