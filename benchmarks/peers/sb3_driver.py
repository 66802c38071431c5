"""Stable-Baselines3 PPO on CartPole-v1 (or Acrobot-v1, MinAtar breakout) for a fixed wall time;
prints one JSON line.

Runs in the ``sb3`` peer venv (see ``venvs.py``; ``--env breakout`` in ``sb3_minatar``, which
holds mtrl and its MinAtar plugin: SB3 steps ``minatar/breakout`` through
``mtrl.plugins.SingleCopyEnv``, the very game mtrl's side plays). The clock starts
``--warmup`` seconds into training and training stops ``--seconds`` later (a callback returns
False), so the figure is the steady-state rate of collect + update cycles. ``--net shared``
is the matched network of the benchmark (a shared tanh MLP 4→64→64 as features, linear
policy and value heads: 4,675 parameters); ``--net default`` is SB3's own MlpPolicy
(separate 64-64 policy and value MLPs); ``--net minatar`` is mtrl's encoder for a 10x10 grid
(conv 16 3x3 → Linear 128, ReLU) shared by linear policy and value heads, as in MinAtar's
paper. ``--normalize`` wraps the envs in ``VecNormalize`` with its defaults (observations and
rewards), which is what rl-baselines3-zoo's ``normalize: true`` does; the returns reported
are the raw ones (``Monitor`` sits below it).
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3 import __version__ as sb3_version
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize
from torch import nn

RECENT = 20  # episodes behind "mean return", as mtrl's trainer reports
#: --env -> (env id, target mean return of the last RECENT episodes)
ENVS = {
    "cartpole": ("CartPole-v1", 475.0),
    "acrobot": ("Acrobot-v1", -100.0),
    "breakout": ("minatar/breakout", 5.0),
}


class SharedMlp(BaseFeaturesExtractor):
    """obs → Linear(64) → tanh → Linear(64) → tanh, shared by policy and value heads."""

    def __init__(self, observation_space: gym.spaces.Box, width: int = 64) -> None:
        super().__init__(observation_space, features_dim=width)
        n = int(np.prod(observation_space.shape))
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(n, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh()
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)


class MinAtarConv(BaseFeaturesExtractor):
    """(C, 10, 10) grid → Conv2d(16, 3x3) → ReLU → Linear(128) → ReLU: mtrl's image encoder for
    grids under 36 pixels (``learner.model: {encoder_dim: 128, torso: [], activation: relu}``),
    shared by policy and value heads."""

    def __init__(self, observation_space: gym.spaces.Box, width: int = 128) -> None:
        super().__init__(observation_space, features_dim=width)
        c, h, w = observation_space.shape
        self.net = nn.Sequential(
            nn.Conv2d(c, 16, 3),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(16 * (h - 2) * (w - 2), width),
            nn.ReLU(),
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.float())


def make_env(env_id: str) -> gym.Env:
    """A gymnasium id, or an mtrl env id (``minatar/breakout``) as one gymnasium env."""
    if "/" in env_id:
        from mtrl.plugins import SingleCopyEnv

        return SingleCopyEnv(env_id)
    return gym.make(env_id)


class Clock(BaseCallback):
    """Starts the measurement after the warm-up, stops training when the window is over."""

    def __init__(self, warmup: float, seconds: float, target: float) -> None:
        super().__init__()
        self.warmup, self.seconds, self.target = warmup, seconds, target
        self.start = self.t0 = self.t1 = 0.0
        self.steps0 = self.steps1 = 0
        self.solved_at: dict[str, float] | None = None

    def _on_training_start(self) -> None:
        self.start = time.perf_counter()

    def _on_step(self) -> bool:
        now = time.perf_counter()
        if not self.t0 and now - self.start >= self.warmup:
            self.t0, self.steps0 = now, self.num_timesteps
        if self.t0 and now - self.t0 >= self.seconds:
            self.t1, self.steps1 = now, self.num_timesteps
            return False
        return True

    def _on_rollout_end(self) -> None:
        buf = [e["r"] for e in self.model.ep_info_buffer][-RECENT:]
        if self.solved_at is None and len(buf) == RECENT and np.mean(buf) >= self.target:
            self.solved_at = {
                "seconds": time.perf_counter() - self.start,
                "env_steps": float(self.num_timesteps),
            }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", choices=sorted(ENVS), default="cartpole")
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--n-steps", type=int, default=128)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--gamma", type=float, default=0.99)
    ap.add_argument("--gae-lambda", type=float, default=0.95)
    ap.add_argument("--ent-coef", type=float, default=0.0)
    ap.add_argument("--normalize", action="store_true", help="VecNormalize (obs and reward)")
    ap.add_argument("--net", choices=["shared", "default", "minatar"], default="shared")
    ap.add_argument("--vec", choices=["dummy", "subproc"], default="dummy")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    vec_cls = DummyVecEnv if a.vec == "dummy" else SubprocVecEnv
    env_id, target = ENVS[a.env]
    env = make_vec_env(
        functools.partial(make_env, env_id), n_envs=a.envs, seed=a.seed, vec_env_cls=vec_cls
    )
    if a.normalize:
        env = VecNormalize(env, gamma=a.gamma)
    kwargs: dict[str, Any] = {}
    if a.net in ("shared", "minatar"):
        kwargs = {
            "features_extractor_class": SharedMlp if a.net == "shared" else MinAtarConv,
            "share_features_extractor": True,
            "net_arch": [],
        }
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=a.n_steps,
        batch_size=a.batch,
        n_epochs=a.epochs,
        learning_rate=a.lr,
        gamma=a.gamma,
        gae_lambda=a.gae_lambda,
        ent_coef=a.ent_coef,
        policy_kwargs=kwargs,
        seed=a.seed,
        device="cpu",
        verbose=0,
    )
    clock = Clock(a.warmup, a.seconds, target)
    model.learn(total_timesteps=10**10, callback=clock)
    env.close()
    returns = [e["r"] for e in model.ep_info_buffer][-RECENT:]
    print(
        json.dumps(
            {
                "peer": "sb3",
                "env_steps": clock.steps1 - clock.steps0,
                "seconds": clock.t1 - clock.t0,
                "total_env_steps": clock.steps1,
                "mean_return": float(np.mean(returns)) if returns else None,
                "solved_at": clock.solved_at,
                "env": a.env,
                "target": target,
                "params": sum(p.numel() for p in model.policy.parameters()),
                "torch_threads": torch.get_num_threads(),
                "versions": {
                    "stable-baselines3": sb3_version,
                    "torch": torch.__version__,
                    "gymnasium": gym.__version__,
                    "numpy": np.__version__,
                },
                "settings": vars(a),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
