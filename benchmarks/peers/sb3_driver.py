"""Stable-Baselines3 PPO on CartPole-v1 for a fixed wall time; prints one JSON line.

Runs in the ``sb3`` peer venv (see ``venvs.py``). The clock starts ``--warmup`` seconds into
training and training stops ``--seconds`` later (a callback returns False), so the figure is
the steady-state rate of collect + update cycles. ``--net shared`` is the matched network of
the benchmark (a shared tanh MLP 4→64→64 as features, linear policy and value heads: 4,675
parameters); ``--net default`` is SB3's own MlpPolicy (separate 64-64 policy and value MLPs).
"""

from __future__ import annotations

import argparse
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
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
from torch import nn

RECENT = 20  # episodes behind "mean return", as mtrl's trainer reports
TARGET = 475.0


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


class Clock(BaseCallback):
    """Starts the measurement after the warm-up, stops training when the window is over."""

    def __init__(self, warmup: float, seconds: float) -> None:
        super().__init__()
        self.warmup, self.seconds = warmup, seconds
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
        if self.solved_at is None and len(buf) == RECENT and np.mean(buf) >= TARGET:
            self.solved_at = {
                "seconds": time.perf_counter() - self.start,
                "env_steps": float(self.num_timesteps),
            }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--n-steps", type=int, default=128)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--net", choices=["shared", "default"], default="shared")
    ap.add_argument("--vec", choices=["dummy", "subproc"], default="dummy")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    vec_cls = DummyVecEnv if a.vec == "dummy" else SubprocVecEnv
    env = make_vec_env("CartPole-v1", n_envs=a.envs, seed=a.seed, vec_env_cls=vec_cls)
    kwargs: dict[str, Any] = {}
    if a.net == "shared":
        kwargs = {
            "features_extractor_class": SharedMlp,
            "share_features_extractor": True,
            "net_arch": [],
        }
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=a.n_steps,
        batch_size=a.batch,
        n_epochs=a.epochs,
        policy_kwargs=kwargs,
        seed=a.seed,
        device="cpu",
        verbose=0,
    )
    clock = Clock(a.warmup, a.seconds)
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
