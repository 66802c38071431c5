"""PufferLib 3 (pufferl's PPO trainer) on CartPole for a fixed wall time; prints one JSON line.

Runs in the ``pufferlib`` peer venv (see ``venvs.py``; pufferlib-core with torch 2.9.0, on the
CPU), or with ``--env ocean`` in the ``pufferlib_ocean`` one (PufferLib 3.0.0 built with its C
envs). PufferLib's own pieces are used as they are: ``pufferlib.vector.make`` over
``pufferlib.emulation.GymnasiumPufferEnv`` (``--backend serial``: every env in this process;
``multiprocessing``: ``--workers`` processes) — or, with ``--env ocean``, PufferLib's C CartPole
vectorised natively, ``--envs`` copies in one C call — and the trainer
``pufferlib.pufferl.PuffeRL``,
alternating ``evaluate()`` (collect ``--horizon`` steps of every env) and ``train()``. The
network matches the benchmark's: a shared tanh MLP 4→64→64 with linear policy and value heads
(4,675 parameters). PPO settings are CleanRL's CartPole ones (Adam 2.5e-4, γ 0.99, λ 0.95, clip
0.2, entropy 0.01, 4 epochs of 4 minibatches); PufferLib's prioritised minibatch sampling is
turned off (``prio_alpha`` 0) so that its PPO is the plain one.

Episode returns come from gymnasium's ``RecordEpisodeStatistics`` (PufferLib collects the
envs' ``info`` dicts); for Ocean, from the C env's own logs (``score``, the mean return of the
``n`` episodes each log covers; an episode of ``n`` steps scores ``n - 1``), the recent mean
taken over the latest logs that cover 20 episodes. The target is 475 on gymnasium's CartPole
and 191 on Ocean's (192 steps: mtrl's 190, as its adapter counts one reward fewer). The
figure is the env-step rate between the first ``(time, steps)`` mark past ``--warmup`` seconds
of training and the last one, as for the other peers.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from importlib import metadata

import gymnasium as gym
import numpy as np
import pufferlib.emulation
import pufferlib.pufferl
import pufferlib.vector
import torch
from torch import nn

RECENT = 20
TARGETS = {"cartpole": 475.0, "ocean": 191.0}


def make_env(buf=None, seed: int = 0) -> pufferlib.emulation.GymnasiumPufferEnv:
    """One CartPole for PufferLib's vectoriser, with episode statistics in ``info``."""
    env = gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))
    return pufferlib.emulation.GymnasiumPufferEnv(env=env, buf=buf, seed=seed)


class Policy(nn.Module):
    """Shared tanh MLP obs → 64 → 64, linear policy and value heads (the benchmark's network)."""

    def __init__(self, obs_dim: int, n_actions: int, width: int = 64) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(obs_dim, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh()
        )
        self.pi = nn.Linear(width, n_actions)
        self.v = nn.Linear(width, 1)
        self.hidden_size = width

    def forward_eval(self, obs: torch.Tensor, state: dict | None = None):
        h = self.body(obs.float().view(obs.shape[0], -1))
        return self.pi(h), self.v(h)

    def forward(self, obs: torch.Tensor, state: dict | None = None):
        return self.forward_eval(obs, state)


def _config(a: argparse.Namespace, num_envs: int, data_dir: str) -> dict:
    batch = num_envs * a.horizon
    return {
        "env": "CartPole-v1",
        "seed": a.seed,
        "torch_deterministic": False,
        "cpu_offload": False,
        "device": "cpu",
        "optimizer": "adam",
        "anneal_lr": False,
        "precision": "float32",
        "total_timesteps": 10**12,  # the wall clock stops the run
        "learning_rate": 2.5e-4,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "update_epochs": 4,
        "clip_coef": 0.2,
        "vf_coef": 0.5,
        "vf_clip_coef": 0.2,
        "max_grad_norm": 0.5,
        "ent_coef": 0.01,
        "adam_beta1": 0.9,
        "adam_beta2": 0.999,
        "adam_eps": 1e-5,
        "data_dir": data_dir,
        "checkpoint_interval": 10**9,
        "batch_size": batch,
        "bptt_horizon": a.horizon,
        "minibatch_size": batch // 4,
        "max_minibatch_size": batch,
        "compile": False,
        "compile_mode": "default",
        "compile_fullgraph": False,
        "vtrace_rho_clip": 1.0,
        "vtrace_c_clip": 1.0,
        "prio_alpha": 0.0,
        "prio_beta0": 1.0,
        "use_rnn": False,
    }


def _recent_logged(logs: list[tuple[float, float]]) -> list[float]:
    """The recent return from the C env's logs: the episode-weighted mean of the latest logs
    that together cover ``RECENT`` episodes, as a one-item list (empty until they do)."""
    total, weighted = 0.0, 0.0
    for score, n in reversed(logs):
        total += n
        weighted += score * n
        if total >= RECENT:
            return [weighted / total]
    return []


def _pufferlib_version() -> str:
    """``pufferlib-core``'s version (the ``pufferlib`` venv) or ``pufferlib``'s (Ocean's)."""
    for dist in ("pufferlib-core", "pufferlib"):
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", choices=sorted(TARGETS), default="cartpole")
    ap.add_argument("--envs", type=int, default=32)
    ap.add_argument("--horizon", type=int, default=32, help="steps per env per evaluate()")
    ap.add_argument("--backend", choices=["serial", "multiprocessing"], default="serial")
    ap.add_argument("--workers", type=int, default=2, help="processes (multiprocessing)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    target = TARGETS[a.env]
    if a.env == "ocean":
        from pufferlib.ocean.environment import env_creator

        vecenv = pufferlib.vector.make(
            env_creator("puffer_cartpole"),
            env_kwargs={"num_envs": a.envs, "seed": a.seed},
            backend=pufferlib.vector.PufferEnv,
        )
    elif a.backend == "serial":
        vecenv = pufferlib.vector.make(
            make_env, num_envs=a.envs, backend=pufferlib.vector.Serial, seed=a.seed
        )
    else:
        vecenv = pufferlib.vector.make(
            make_env,
            num_envs=a.envs,
            num_workers=a.workers,
            batch_size=a.envs,
            backend=pufferlib.vector.Multiprocessing,
            seed=a.seed,
        )
    obs_dim = int(np.prod(vecenv.single_observation_space.shape))
    policy = Policy(obs_dim, int(vecenv.single_action_space.n))
    data_dir = tempfile.mkdtemp(prefix="puffer_peer_")
    trainer = pufferlib.pufferl.PuffeRL(_config(a, vecenv.num_agents, data_dir), vecenv, policy)
    trainer.print_dashboard = lambda *args, **kw: None  # no terminal UI in the timed loop
    returns: list[float] = []
    logs: list[tuple[float, float]] = []
    recent: list[float] = []
    marks: list[tuple[float, int]] = []
    solved_at = None
    start = time.perf_counter()
    while time.perf_counter() - start < a.warmup + a.seconds:
        stats = trainer.evaluate()
        if a.env == "ocean":  # the C env's logs: (mean score, episodes) pairs
            for score, n in zip(stats.pop("score", []), stats.pop("n", []), strict=False):
                logs.append((float(score), float(n)))
            recent = _recent_logged(logs)
        else:
            returns.extend(float(r) for r in np.ravel(stats.get("episode/r", [])))
            stats.pop("episode/r", None)
            recent = returns[-RECENT:] if len(returns) >= RECENT else []
        trainer.train()
        now = time.perf_counter()
        marks.append((now, int(trainer.global_step)))
        if solved_at is None and recent and np.mean(recent) >= target:
            solved_at = {"seconds": now - start, "env_steps": float(trainer.global_step)}
    window = [m for m in marks if m[0] - start >= a.warmup] or marks[-2:]
    (t0, s0), (t1, s1) = window[0], window[-1]
    out = {
        "peer": "pufferlib",
        "env_steps": s1 - s0,
        "seconds": t1 - t0,
        "total_env_steps": marks[-1][1] if marks else 0,
        "mean_return": float(np.mean(recent)) if recent else None,
        "solved_at": solved_at,
        "params": sum(p.numel() for p in policy.parameters()),
        "env": a.env,
        "target": target,
        "versions": {
            "pufferlib": _pufferlib_version(),
            "torch": torch.__version__,
            "gymnasium": gym.__version__,
            "numpy": np.__version__,
        },
        "settings": vars(a),
    }
    trainer.utilization.stop()  # its sampling thread is not a daemon: the process would stay
    vecenv.close()
    sys.stdout.flush()
    print("PEER_RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
