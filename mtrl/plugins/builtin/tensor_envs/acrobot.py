"""Acrobot-v1 in tensors: gymnasium's "book" dynamics, one RK4 step of 0.2 s, batched."""

from __future__ import annotations

from math import pi

import torch

from mtrl.plugins.builtin.tensor_envs.base import TensorBatchEnv
from mtrl.plugins.builtin.tensor_envs.spaces import (
    ACROBOT_MAX_VEL_1,
    ACROBOT_MAX_VEL_2,
    env_spaces,
)

DT = 0.2
LINK_LENGTH_1 = 1.0
LINK_MASS_1 = 1.0
LINK_MASS_2 = 1.0
LINK_COM_POS_1 = 0.5
LINK_COM_POS_2 = 0.5
LINK_MOI = 1.0
MAX_VEL_1 = ACROBOT_MAX_VEL_1
MAX_VEL_2 = ACROBOT_MAX_VEL_2
#: gymnasium's ``wrap`` subtracts 2*pi in a loop; one step moves an angle by less than 2*pi
#: (|velocity| <= 9*pi, dt = 0.2), so a few unrolled passes reproduce it exactly.
_WRAP_PASSES = 3


def _dsdt(s: tuple[torch.Tensor, ...], a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Time derivative of ``(theta1, theta2, dtheta1, dtheta2)`` under torque ``a``."""
    m1, m2 = LINK_MASS_1, LINK_MASS_2
    l1, lc1, lc2 = LINK_LENGTH_1, LINK_COM_POS_1, LINK_COM_POS_2
    i1 = i2 = LINK_MOI
    g = 9.8
    theta1, theta2, dtheta1, dtheta2 = s
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * torch.cos(theta2)) + i1 + i2
    d2 = m2 * (lc2**2 + l1 * lc2 * torch.cos(theta2)) + i2
    phi2 = m2 * lc2 * g * torch.cos(theta1 + theta2 - pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * torch.sin(theta2)
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * torch.sin(theta2)
        + (m1 * lc1 + m2 * l1) * g * torch.cos(theta1 - pi / 2)
        + phi2
    )
    ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * torch.sin(theta2) - phi2) / (
        m2 * lc2**2 + i2 - d2**2 / d1
    )
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return dtheta1, dtheta2, ddtheta1, ddtheta2


def _wrap(x: torch.Tensor) -> torch.Tensor:
    for _ in range(_WRAP_PASSES):
        x = torch.where(x > pi, x - 2 * pi, x)
    for _ in range(_WRAP_PASSES):
        x = torch.where(x < -pi, x + 2 * pi, x)
    return x


class Acrobot(TensorBatchEnv):
    """State ``(theta1, theta2, dtheta1, dtheta2)``; reward -1 until the tip is above the bar."""

    gym_id = "Acrobot-v1"
    default_max_episode_steps = 500
    reset_low = (-0.1,) * 4
    reset_high = (0.1,) * 4
    reset_in_float32 = True
    single_observation_space, single_action_space = env_spaces(gym_id)

    def dynamics(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        torque = (actions - 1).to(state.dtype)
        y0 = state.unbind(-1)
        dt, dt2 = DT, DT / 2.0
        k1 = _dsdt(y0, torque)
        k2 = _dsdt(tuple(y + dt2 * k for y, k in zip(y0, k1, strict=True)), torque)
        k3 = _dsdt(tuple(y + dt2 * k for y, k in zip(y0, k2, strict=True)), torque)
        k4 = _dsdt(tuple(y + dt * k for y, k in zip(y0, k3, strict=True)), torque)
        ns = [
            y + dt / 6.0 * (a + 2 * b + 2 * c + d)
            for y, a, b, c, d in zip(y0, k1, k2, k3, k4, strict=True)
        ]
        s0, s1 = _wrap(ns[0]), _wrap(ns[1])
        s2 = torch.clamp(ns[2], -MAX_VEL_1, MAX_VEL_1)
        s3 = torch.clamp(ns[3], -MAX_VEL_2, MAX_VEL_2)
        terminated = -torch.cos(s0) - torch.cos(s1 + s0) > 1.0
        reward = torch.where(terminated, 0.0, -1.0).to(state.dtype)
        return torch.stack((s0, s1, s2, s3), -1), reward, terminated

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        s0, s1, s2, s3 = state.unbind(-1)
        return torch.stack(
            (torch.cos(s0), torch.sin(s0), torch.cos(s1), torch.sin(s1), s2, s3), -1
        ).float()
