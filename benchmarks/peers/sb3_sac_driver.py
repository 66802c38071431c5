"""Stable-Baselines3 SAC on one gymnasium env until a target return; prints one JSON line.

Runs in the ``sb3_mujoco`` peer venv (see ``venvs.py``). SAC with SB3's defaults (MlpPolicy:
two hidden layers of 256 for the actor and each critic, one env, one gradient step of 256 per
env step from the 100th step, lr 3e-4, tau 0.005, automatic temperature), torch on
``--threads`` threads. Training stops when the mean return of the last 20 training episodes
first reaches ``--target`` (the exploring policy, as mtrl's ``stop_at_target`` reads it) or
after ``--max-steps``; then the final agent plays ``--eval-episodes`` episodes with the mean
action (seeds apart from training's), as ``mtrl eval --greedy`` does.
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import SAC
from stable_baselines3 import __version__ as sb3_version
from stable_baselines3.common.callbacks import BaseCallback

RECENT = 20  # episodes behind "mean return", as mtrl's trainer reports


class StopAtTarget(BaseCallback):
    """Stops training once the mean of the last ``RECENT`` episodes reaches the target."""

    def __init__(self, target: float) -> None:
        super().__init__()
        self.target = target
        self.start = 0.0
        self.reached: dict[str, float] | None = None

    def _on_training_start(self) -> None:
        self.start = time.perf_counter()

    def _on_step(self) -> bool:
        if not any(self.locals.get("dones", [])):
            return True
        buf = [e["r"] for e in self.model.ep_info_buffer][-RECENT:]
        if len(buf) == RECENT and np.mean(buf) >= self.target:
            self.reached = {
                "seconds": time.perf_counter() - self.start,
                "env_steps": float(self.num_timesteps),
            }
            return False
        return True


def make_env(env_id: str) -> gym.Env:
    """A gymnasium id, or an mtrl env id (``<plugin>/<name>``, e.g. ``scisim/heat1d``) as one
    gymnasium env through ``mtrl.plugins.SingleCopyEnv`` (the peer venv then holds mtrl and the
    plugin: ``sb3_mtrl`` in ``venvs.py``)."""
    if "/" in env_id:
        from mtrl.plugins import SingleCopyEnv

        return SingleCopyEnv(env_id)
    return gym.make(env_id)


def evaluate(model: SAC, env_id: str, episodes: int, seed: int) -> list[float]:
    """Returns of ``episodes`` greedy episodes on a fresh env seeded away from training's."""
    env = make_env(env_id)
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=10_000 + 1000 * seed + i)
        done, total = False, 0.0
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return returns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="InvertedPendulum-v5")
    ap.add_argument("--target", type=float, required=True)
    ap.add_argument("--max-steps", type=int, default=100_000)
    ap.add_argument("--eval-episodes", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    env = make_env(a.env)
    model = SAC("MlpPolicy", env, seed=a.seed, device="cpu", verbose=0)
    stop = StopAtTarget(a.target)
    t0 = time.perf_counter()
    model.learn(total_timesteps=a.max_steps, callback=stop)
    train_s = time.perf_counter() - t0
    env.close()
    greedy = evaluate(model, a.env, a.eval_episodes, a.seed)
    recent = [e["r"] for e in model.ep_info_buffer][-RECENT:]
    print(
        json.dumps(
            {
                "peer": "sb3_sac",
                "env": a.env,
                "env_steps": int(model.num_timesteps),
                "train_s": train_s,
                "reached": stop.reached,
                "final_return": float(np.mean(recent)) if recent else None,
                "greedy_returns": greedy,
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
