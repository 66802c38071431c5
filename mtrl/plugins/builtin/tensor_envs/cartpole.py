"""CartPole-v1 in tensors: gymnasium's ``CartPoleEnv`` equations (Euler integrator) batched."""

from __future__ import annotations

import torch

from mtrl.plugins.builtin.tensor_envs.base import TensorBatchEnv
from mtrl.plugins.builtin.tensor_envs.spaces import (
    CARTPOLE_THETA_THRESHOLD,
    CARTPOLE_X_THRESHOLD,
    env_spaces,
)

GRAVITY = 9.8
MASSCART = 1.0
MASSPOLE = 0.1
TOTAL_MASS = MASSPOLE + MASSCART
LENGTH = 0.5  # half the pole's length
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_THRESHOLD = CARTPOLE_THETA_THRESHOLD
X_THRESHOLD = CARTPOLE_X_THRESHOLD


class CartPole(TensorBatchEnv):
    """State ``(x, x_dot, theta, theta_dot)``; reward 1 every step, the terminal one included."""

    gym_id = "CartPole-v1"
    default_max_episode_steps = 500
    reset_low = (-0.05,) * 4
    reset_high = (0.05,) * 4
    single_observation_space, single_action_space = env_spaces(gym_id)

    def dynamics(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, x_dot, theta, theta_dot = state.unbind(-1)
        force = torch.where(actions == 1, FORCE_MAG, -FORCE_MAG).to(state.dtype)
        costheta = torch.cos(theta)
        sintheta = torch.sin(theta)
        temp = (force + POLEMASS_LENGTH * torch.square(theta_dot) * sintheta) / TOTAL_MASS
        thetaacc = (GRAVITY * sintheta - costheta * temp) / (
            LENGTH * (4.0 / 3.0 - MASSPOLE * torch.square(costheta) / TOTAL_MASS)
        )
        xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
        x = x + TAU * x_dot
        x_dot = x_dot + TAU * xacc
        theta = theta + TAU * theta_dot
        theta_dot = theta_dot + TAU * thetaacc
        terminated = (
            (x < -X_THRESHOLD)
            | (x > X_THRESHOLD)
            | (theta < -THETA_THRESHOLD)
            | (theta > THETA_THRESHOLD)
        )
        reward = torch.ones_like(x)
        return torch.stack((x, x_dot, theta, theta_dot), -1), reward, terminated

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        return state.float()
