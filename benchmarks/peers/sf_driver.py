"""Sample Factory APPO on CartPole-v1 for a fixed wall time; prints one JSON line.

Runs in the ``sf`` peer venv (see ``venvs.py``). Sample Factory's own runner is used as is
(``make_runner`` / ``init`` / ``run``); an observer records ``(time, env steps)`` after each
learner iteration, and the figure is the rate between the first record past ``--warmup``
seconds of training and the last one (Sample Factory counts env steps that reached the
learner, as mtrl does). The network matches the benchmark's: a shared tanh MLP 4→64→64
(``--encoder_mlp_layers 64 64``, no RNN, no decoder) with linear policy and value heads.
Extra Sample Factory flags can follow ``--``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from importlib import metadata
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from sample_factory.algo.runners.runner import AlgoObserver, Runner
from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
from sample_factory.envs.env_utils import register_env
from sample_factory.model.actor_critic import create_actor_critic
from sample_factory.train import make_runner

RECENT = 20
TARGET = 475.0


def make_env(full_env_name: str, cfg: Any = None, env_config: Any = None, render_mode=None):
    """Sample Factory's env factory for a plain gymnasium env."""
    return gym.make(full_env_name, render_mode=render_mode)


class Clock(AlgoObserver):
    """Records (time, env steps) after every learner iteration and the first solved moment;
    time counts from the first iteration (process start-up excluded, as for the other runs).

    It also feeds ``runner.total_train_seconds``: Sample Factory 2.1.1 never updates it, so
    its own ``--train_for_seconds`` does not stop a run.
    """

    def __init__(self) -> None:
        self.start: float | None = None
        self.marks: list[tuple[float, int]] = []
        self.solved_at: dict[str, float] | None = None

    def on_training_step(self, runner: Runner, training_iteration_since_resume: int) -> None:
        now = time.perf_counter()
        if self.start is None:
            self.start = now
        steps = runner.total_env_steps_since_resume or 0
        self.marks.append((now, steps))
        rewards = _recent(runner)
        if self.solved_at is None and len(rewards) == RECENT and np.mean(rewards) >= TARGET:
            self.solved_at = {"seconds": now - self.start, "env_steps": float(steps)}
        runner.total_train_seconds = now - self.start


def _recent(runner: Runner) -> list[float]:
    stats = runner.policy_avg_stats.get("reward")
    return list(stats[0])[-RECENT:] if stats else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--envs-per-worker", type=int, default=16)
    ap.add_argument("--batched", action="store_true", help="--batched_sampling True")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("extra", nargs="*", help="more Sample Factory flags (after --)")
    a = ap.parse_args()
    register_env("CartPole-v1", make_env)
    train_dir = tempfile.mkdtemp(prefix="sf_peer_")
    argv = [
        "--env=CartPole-v1",
        "--algo=APPO",
        "--experiment=peers_cartpole",
        f"--train_dir={train_dir}",
        "--restart_behavior=overwrite",
        "--device=cpu",
        f"--seed={a.seed}",
        f"--num_workers={a.workers}",
        f"--num_envs_per_worker={a.envs_per_worker}",
        f"--batched_sampling={a.batched}",
        "--use_rnn=False",
        "--recurrence=1",
        "--encoder_mlp_layers",
        "64",
        "64",
        "--nonlinearity=tanh",
        # The CartPole example of sf_examples/train_gym_env.py:
        "--with_vtrace=False",
        "--batch_size=512",
        "--reward_scale=0.1",
        # No checkpoints or summaries inside the measured window:
        "--save_every_sec=100000",
        "--save_best_every_sec=100000",
        "--experiment_summaries_interval=100000",
        "--with_wandb=False",
        f"--train_for_seconds={int(a.warmup + a.seconds)}",
        *a.extra,
    ]
    parser, _ = parse_sf_args(argv=argv)
    cfg = parse_full_cfg(parser, argv)
    cfg, runner = make_runner(cfg)
    clock = Clock()
    runner.register_observer(clock)
    status = runner.init()
    if status == 0:
        status = runner.run()
    start = clock.start or 0.0
    window = [m for m in clock.marks if m[0] - start >= a.warmup]
    if len(window) < 2:
        window = clock.marks[-2:] if len(clock.marks) >= 2 else [(0.0, 0), (1.0, 0)]
    (t0, s0), (t1, s1) = window[0], window[-1]
    rewards = _recent(runner)
    params = None
    if runner.env_info is not None:  # the same network, built here only to count it
        ac = create_actor_critic(cfg, runner.env_info.obs_space, runner.env_info.action_space)
        params = sum(p.numel() for p in ac.parameters())
    out = {
        "peer": "sf",
        "status": int(status),
        "env_steps": s1 - s0,
        "seconds": t1 - t0,
        "total_env_steps": clock.marks[-1][1] if clock.marks else 0,
        "mean_return": float(np.mean(rewards)) if rewards else None,
        "solved_at": clock.solved_at,
        "params": params,
        "versions": {
            "sample-factory": metadata.version("sample-factory"),
            "torch": torch.__version__,
            "gymnasium": gym.__version__,
            "numpy": np.__version__,
        },
        "settings": {**vars(a), "argv": argv},
    }
    shutil.rmtree(train_dir, ignore_errors=True)
    sys.stdout.flush()
    print("PEER_RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
