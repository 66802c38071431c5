"""mtrl (IMPALA/V-trace + PopArt) on CartPole for a fixed wall time; prints one JSON line.

Runs in mtrl's own venv (gymnasium's CartPole-v1), or with ``--env ocean`` in the
``pufferlib_ocean`` peer venv (PufferLib's C CartPole through plugins_contrib/mtrl-pufferlib:
``pufferlib/cartpole``, target 190, 192 steps). The trainer is used as ``mtrl train`` builds
it; a wrapper around the pool's ``get`` records ``(time, env steps)`` each round and calls
``Trainer.request_stop()`` once ``--warmup`` + ``--seconds`` have passed since the first
unroll. The network matches the
benchmark's: ``learner.model: {encoder_dim: 64, torso: [], activation: tanh}`` is the vector
encoder 4→64→64 (tanh) feeding linear policy and value heads directly (4,675 parameters).
``--profile FILE`` writes a cProfile of the main process (useful in serial mode).
``--config FILE`` runs that config's task, actors and learner instead (a plugin's rule too, e.g.
``plugins_contrib/mtrl-ppo/configs/ppo_cartpole.yaml``): only its seed, budget, tracking and
checkpoints are the benchmark's, and ``--envs``/``--batch``/``--unroll``/``--lr`` are ignored.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import tempfile
import time
from importlib import metadata
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import yaml

from mtrl.config import parse_config
from mtrl.plugins import get_plugins
from mtrl.train.trainer import RECENT_EPISODES as RECENT
from mtrl.train.trainer import Trainer

#: --env -> (env id, target mean return of the last 20 episodes)
ENVS = {
    "cartpole": ("gymnasium/CartPole-v1", 475.0),
    "ocean": ("pufferlib/cartpole", 190.0),
    "acrobot": ("gymnasium/Acrobot-v1", -100.0),
    "breakout": ("minatar/breakout", 5.0),
}


def from_file(a: argparse.Namespace, run_dir: str) -> Any:
    """``--config``'s experiment with the benchmark's seed, budget, tracking and checkpoints."""
    with open(a.config, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    data.update(seed=a.seed, total_env_steps=1_000_000_000, stop_at_target=False)
    data["tracking"] = {
        "run_dir": run_dir,
        "log_every_s": 1000,
        "console": "quiet",
        "wandb": {"mode": "disabled"},
    }
    data["checkpoint"] = {"enabled": False}
    text = yaml.safe_dump(data, sort_keys=False)
    return parse_config(text, a.config, **get_plugins().config_context())


def config(a: argparse.Namespace, run_dir: str) -> Any:
    """The experiment of one benchmark run."""
    if a.config:
        return from_file(a, run_dir)
    return parse_config(
        f"""
        name: peers
        seed: {a.seed}
        total_env_steps: 1000000000
        tasks:
          - env: {ENVS[a.env][0]}
            num_envs: {a.envs}
        scheduler: {{num_actors: {a.actors}}}
        actors: {{mode: {a.mode}}}
        learner:
          unroll_length: {a.unroll}
          batch_size: {a.batch}
          learning_rate: {a.lr}
          model: {{encoder_dim: 64, torso: [], activation: tanh}}
        tracking: {{run_dir: {run_dir}, log_every_s: 1000, console: quiet,
                    wandb: {{mode: disabled}}}}
        checkpoint: {{enabled: false}}
        """
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", choices=sorted(ENVS), default="cartpole")
    ap.add_argument("--mode", choices=["serial", "process", "thread"], default="serial")
    ap.add_argument("--envs", type=int, default=32, help="env copies per actor")
    ap.add_argument("--actors", type=int, default=2, help="actor workers (parallel modes)")
    ap.add_argument("--batch", type=int, default=32, help="env columns (unrolls) per update")
    ap.add_argument("--unroll", type=int, default=20)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", default=None, help="write a cProfile of the run here")
    ap.add_argument("--config", default=None, help="run this config's tasks and learner")
    a = ap.parse_args()
    target = ENVS[a.env][1]
    marks: list[tuple[float, int]] = []
    solved_at: dict[str, float] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(config(a, tmp), console=False)
        params = sum(p.numel() for p in trainer.model.parameters())
        orig_get = trainer.pool.get

        def get(timeout: float = 1.0) -> list:
            nonlocal solved_at
            out = orig_get(timeout)
            now, steps = time.perf_counter(), trainer.env_steps
            if steps > 0:
                marks.append((now, steps))
                res = trainer.results()[0] if solved_at is None else None
                if res and res.episodes >= RECENT and (res.mean_return or 0.0) >= target:
                    solved_at = {"seconds": now - marks[0][0], "env_steps": float(steps)}
                if now - marks[0][0] >= a.warmup + a.seconds:
                    trainer.request_stop()
            return out

        trainer.pool.get = get
        prof = cProfile.Profile() if a.profile else None
        try:
            if prof is not None:
                prof.enable()
            result = trainer.run()
            if prof is not None:
                prof.disable()
                prof.dump_stats(a.profile)
        finally:
            trainer.close()
    t_start = marks[0][0]
    window = [m for m in marks if m[0] - t_start >= a.warmup]
    (t0, s0), (t1, s1) = window[0], window[-1]
    print(
        json.dumps(
            {
                "peer": "mtrl",
                "env_steps": s1 - s0,
                "seconds": t1 - t0,
                "total_env_steps": result.env_steps,
                "updates": result.updates,
                "mean_return": result.tasks[0].mean_return,
                "solved_at": solved_at,
                "env": a.env,
                "target": target,
                "params": params,
                "versions": {
                    "mtrl": metadata.version("mtrl"),
                    "torch": torch.__version__,
                    "gymnasium": gym.__version__,
                    "numpy": np.__version__,
                },
                "settings": {k: v for k, v in vars(a).items() if k != "profile"},
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
