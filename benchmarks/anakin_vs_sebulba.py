"""Anakin vs Sebulba on CartPole, side by side in one run.

Measured, with the same model (MLP encoder 4→W→W, torso [W]), unroll length and learner batch
(``--anakin-envs × --unroll`` samples per update):

* **training** env steps/s: (i) Anakin — ``tensor/CartPole-v1`` on ``--device``, rollout (one
  ``torch.compile`` graph per unroll unless ``--no-compile``) then ``ImpalaLearner.update``, no host
  copies; (ii) serial Sebulba — the trainer's ``SerialPool`` stepping ``gymnasium/CartPole-v1``
  (gymnasium's numpy-batched ``CartPoleVectorEnv``) on the host, batched inference, unrolls
  copied to the device, one update per ``--anakin-envs`` columns gathered. Sebulba runs at
  ``--sebulba-envs`` copies per env (the config default, 16) and again at ``--anakin-envs``;
* **rollout** env steps/s (no updates), which isolates what Anakin changes;
* **raw env stepping** of the tensor env (eager and compiled) vs gymnasium's vector CartPole.

Each figure is the median of ``--rounds`` interleaved rounds of ``--seconds`` each (the machine
is shared: interleaving exposes every variant to the same load). Usage::

    python benchmarks/anakin_vs_sebulba.py [--device cpu] [--anakin-envs 4096] [--seconds 5]

Writes ``docs/results/anakin_vs_sebulba.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

from mtrl.actors.inference import InferenceModel
from mtrl.actors.pool import TaskSetup
from mtrl.actors.serial_pool import SerialPool
from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.anakin import AnakinRunner, anakin_train_step
from mtrl.config.learner import LearnerConfig, ModelConfig
from mtrl.learner.batch import task_batch
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import make_env
from mtrl.plugins.builtin.tensor_envs import env_class

Bench = Callable[[], int]  # runs one unit of work, returns env steps done


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rate(fn: Bench, seconds: float, device: torch.device) -> float:
    """Env steps/s of ``fn`` called repeatedly for about ``seconds`` (after one warm call)."""
    fn()
    _sync(device)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += fn()
    _sync(device)
    return steps / (time.perf_counter() - start)


def _learner(args: argparse.Namespace, env: Any, device: torch.device) -> ImpalaLearner:
    torch.manual_seed(0)
    cfg = LearnerConfig(
        unroll_length=args.unroll,
        model=ModelConfig(encoder_dim=args.width, torso=[args.width]),
        device=str(device),
    )
    spaces = TaskSpaces(env.single_observation_space, env.single_action_space)
    return ImpalaLearner(MultiTaskModel([spaces], cfg.model).to(device), cfg, ["cartpole"])


def anakin_benches(args: argparse.Namespace, device: torch.device) -> tuple[dict, float]:
    """Training and rollout closures for Anakin; also returns the compile (first call) time."""
    env = make_env("tensor/CartPole-v1", args.anakin_envs, seed=0, device=str(device))
    learner = _learner(args, env, device)
    compile_arg = False if args.no_compile else (args.compile_mode or True)
    runner = AnakinRunner(0, env, args.unroll, 1.0, compile=compile_arg)
    start = time.perf_counter()
    runner.collect(learner.model, 0)
    _sync(device)
    first = time.perf_counter() - start
    n = args.unroll * args.anakin_envs

    def train() -> int:
        anakin_train_step([runner], learner)
        return n

    def rollout() -> int:
        runner.collect(learner.model, learner.version)
        return n

    return {"anakin/train": train, "anakin/rollout": rollout}, first


def sebulba_benches(args: argparse.Namespace, device: torch.device, num_envs: int) -> dict:
    """The trainer's serial Sebulba loop: get unrolls, update per batch, release, publish."""
    env = make_env("gymnasium/CartPole-v1", num_envs, seed=0)
    learner = _learner(args, env, device)
    setup = TaskSetup(
        0, "cartpole", "gymnasium/CartPole-v1", num_envs, 0, 1.0,
        env.single_observation_space, env.single_action_space,
    )  # fmt: skip
    inference = InferenceModel(learner.model, shared=True)
    pool = SerialPool([setup], [env], args.unroll, inference)
    per_update = max(args.anakin_envs // num_envs, 1)

    def train() -> int:
        ready = [u for _ in range(per_update) for u in pool.get()]
        learner.update([task_batch(u.buffer, device) for u in ready])
        for u in ready:
            pool.release(u)
        pool.publish(learner.model, learner.version)
        return per_update * num_envs * args.unroll

    def rollout() -> int:
        for u in pool.get():
            pool.release(u)
        return num_envs * args.unroll

    key = f"sebulba{num_envs}"
    return {f"{key}/train": train, f"{key}/rollout": rollout}


def _tensor_stepper(n: int, device: torch.device, compiled: bool) -> Bench:
    env = env_class("CartPole-v1")(n, 0, device=device, compile=compiled)
    env.reset_tensor()
    actions = torch.randint(0, 2, (64, n), device=device)
    i = 0

    def step() -> int:
        nonlocal i
        env.step_tensor(actions[i % 64])
        i += 1
        return n

    return step


def _gymnasium_stepper(n: int) -> Bench:
    import gymnasium as gym

    vec = gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="vector_entry_point")
    vec.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 2, (64, n))
    i = 0

    def step() -> int:
        nonlocal i
        vec.step(actions[i % 64])
        i += 1
        return n

    return step


def env_benches(args: argparse.Namespace, device: torch.device) -> dict[str, Bench]:
    """Raw stepping with random actions drawn up front (not timed)."""
    out: dict[str, Bench] = {}
    for n in sorted({args.sebulba_envs, args.anakin_envs}):
        out[f"env/tensor/{n}"] = _tensor_stepper(n, device, compiled=False)
        if not args.no_compile:
            out[f"env/tensor_compiled/{n}"] = _tensor_stepper(n, device, compiled=True)
        out[f"env/gymnasium/{n}"] = _gymnasium_stepper(n)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--anakin-envs", type=int, default=4096)
    p.add_argument("--sebulba-envs", type=int, default=16)
    p.add_argument("--unroll", type=int, default=20)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--compile-mode", default=None, help='e.g. "reduce-overhead" on CUDA')
    p.add_argument("--skip-env", action="store_true", help="skip raw env stepping")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    info = machine()

    benches, compile_s = anakin_benches(args, device)
    print(f"anakin first unroll (compile): {compile_s:.1f} s", flush=True)
    for n in sorted({args.sebulba_envs, args.anakin_envs}):
        benches.update(sebulba_benches(args, device, n))
    if not args.skip_env:
        benches.update(env_benches(args, device))
    rounds: dict[str, list[float]] = {k: [] for k in benches}
    for r in range(args.rounds):
        for name, fn in benches.items():
            rounds[name].append(_rate(fn, args.seconds, device))
            print(f"round {r + 1} {name:32s} {rounds[name][-1]:>14,.0f} steps/s", flush=True)
    med = {k: statistics.median(v) for k, v in rounds.items()}

    a, s_small, s_same = args.anakin_envs, args.sebulba_envs, args.anakin_envs
    ratios = {
        f"train: anakin{a} / sebulba{s_small}": med["anakin/train"]
        / med[f"sebulba{s_small}/train"],
        f"train: anakin{a} / sebulba{s_same}": med["anakin/train"] / med[f"sebulba{s_same}/train"],
        f"rollout: anakin{a} / sebulba{s_small}": (
            med["anakin/rollout"] / med[f"sebulba{s_small}/rollout"]
        ),
        f"rollout: anakin{a} / sebulba{s_same}": (
            med["anakin/rollout"] / med[f"sebulba{s_same}/rollout"]
        ),
    }
    # Where Anakin's training time goes: seconds per env step in rollout vs the whole step.
    rollout_share = med["anakin/train"] / med["anakin/rollout"]
    print()
    for k, v in med.items():
        print(f"{k:34s} {v:>14,.0f} env steps/s")
    for k, v in ratios.items():
        print(f"{k:34s} {v:>8.2f}x")
    print(f"anakin: rollout is {rollout_share:.0%} of a training step's time")
    info["load_avg_1min_at_end"] = os.getloadavg()[0]
    path = write_result(
        "anakin_vs_sebulba",
        {
            "machine": info,
            "settings": {
                **vars(args),
                "model": f"encoder 4-{args.width}-{args.width}, torso [{args.width}]",
                "learner_batch_samples": args.anakin_envs * args.unroll,
                "sebulba_env": "gymnasium/CartPole-v1 (numpy-batched CartPoleVectorEnv) in "
                "SerialPool; inference on --device; unrolls copied with task_batch",
                "anakin_env": "tensor/CartPole-v1 on --device; AnakinRunner + ImpalaLearner.update",
            },
            "anakin_compile_s": compile_s,
            "median_steps_per_s": med,
            "rounds_steps_per_s": rounds,
            "ratios": ratios,
            "anakin_rollout_time_share": rollout_share,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
