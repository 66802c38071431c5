"""Throughput against the limits of the pipeline's stages, measured side by side in one run.

For each workload (a vector task and an image task) and the same envs and network:

(a) raw env stepping alone (random actions), (c) batched inference alone (the inference model on
real observation batches), (b) learner updates alone (the same unrolls replayed), and the
end-to-end training rate in each actor mode. On this 2-core CPU the stages share the cores,
so the limit is ``1 / (1/a + 1/b + 1/c)`` and the target is end-to-end ≥ 0.9 of it; where
stages run on separate hardware (envs on CPU cores, inference and learner on a GPU) the target
is ≥ 0.75 · min(a, b, c), and both ratios are printed. The model, the learner and the inference
stage run on ``learner.device`` (``auto``: the GPU when there is one), as in a run.

Each workload is measured ``--repeat`` times (stages, then end-to-end, back to back) and the
median ratio per mode is reported: single measurements on a shared machine swing by ±10 %.

Usage: ``python benchmarks/throughput.py [--seconds 8] [--repeat 3] [--workloads cartpole
minatar atari] [--modes serial process process-central thread]``. Writes
``docs/results/throughput.json``.
"""

from __future__ import annotations

import argparse
import builtins
import functools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result
from _timed_trainer import TimedTrainer

from mtrl.actors.inference import InferenceModel
from mtrl.actors.pool import TaskSetup
from mtrl.actors.serial_pool import SerialPool
from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.config import parse_config
from mtrl.learner.batch import task_batch
from mtrl.learner.device import resolve_device
from mtrl.learner.distributions import env_actions
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import get_plugins
from mtrl.plugins.spaces import random_actions

WORKLOADS = {
    "cartpole": {"env": "gymnasium/CartPole-v1", "num_envs": 32, "actors": 2},
    "minatar": {"env": "minatar/breakout", "num_envs": 32, "actors": 2},
    # Sebulba Atari (needs the envpool extra): a GPU machine's workload, 84x84x4 frames.
    "atari": {"env": "envpool/Pong-v5", "num_envs": 64, "actors": 4, "interference_steps": 300},
    # The same 256 envs in fewer, larger pools: each envpool step spreads over more threads.
    "atari-2x128": {
        "env": "envpool/Pong-v5",
        "num_envs": 128,
        "actors": 2,
        "interference_steps": 200,
    },
    "atari-1x256": {
        "env": "envpool/Pong-v5",
        "num_envs": 256,
        "actors": 1,
        "interference_steps": 100,
    },
}
UNROLL = 20


def _actors(mode: str) -> str:
    """The ``actors`` mapping of a benchmark mode: an actor mode, optionally with the
    inference arrangement after a dash (``process-central``, ``process-local``)."""
    actor_mode, _, inference = mode.partition("-")
    return f"{{mode: {actor_mode}" + (f", inference: {inference}}}" if inference else "}")


def _config(w: dict[str, Any], mode: str, steps: int, run_dir: str) -> Any:
    return parse_config(
        f"""
        name: bench
        total_env_steps: {steps}
        tasks:
          - env: {w["env"]}
            num_envs: {w["num_envs"]}
        scheduler: {{num_actors: {w["actors"]}}}
        actors: {_actors(mode)}
        learner: {{unroll_length: {UNROLL}, batch_size: {w["num_envs"] * w["actors"]}}}
        tracking: {{run_dir: {run_dir}, log_every_s: 1, console: quiet, wandb: {{mode: disabled}}}}
        """
    )


def _timed(fn, seconds: float, device: torch.device | None = None) -> tuple[int, float]:
    """Call ``fn() -> units`` until ``seconds`` pass; return (units, elapsed), the elapsed time
    read once ``device`` (a GPU's queue) has finished what the calls launched."""
    fn()  # warm-up
    units, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        units += fn()
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)
    return units, time.perf_counter() - t0


def _random_stepping(env_name: str, n: int, copies: int, seconds: float) -> float:
    """Env steps/s of ``copies`` batch envs of ``n`` copies each, stepped in turn with random
    actions drawn up front, nothing else."""
    spec = get_plugins().envs.get(env_name)
    envs = [spec.build(n, seed) for seed in range(copies)]
    for env in envs:
        env.reset()
    rng = np.random.default_rng(0)
    acts = [random_actions(envs[0].single_action_space, n, rng) for _ in range(64)]
    i = [0]

    def step() -> int:
        envs[i[0] % len(envs)].step(acts[i[0] % 64])
        i[0] += 1
        return n

    try:
        units, dt = _timed(step, seconds)
    finally:
        for env in envs:
            env.close()
    return units / dt


def stage_env(w: dict[str, Any], seconds: float) -> float:
    """(a) env steps/s of the workload's batch envs (one per actor, stepped in turn)."""
    return _random_stepping(w["env"], w["num_envs"], w["actors"], seconds)


def stage_env_one_pool(w: dict[str, Any], seconds: float) -> float:
    """(a1) env steps/s of one batch env holding all the workload's copies (actors x
    num_envs): for envpool, its raw rate with every core's thread busy on one pool, the
    figure a Sebulba run on the same cores is held against."""
    return _random_stepping(w["env"], w["num_envs"] * w["actors"], 1, seconds)


def _model_and_unrolls(cfg: Any) -> tuple[MultiTaskModel, ImpalaLearner, list]:
    spec = get_plugins().envs.get(cfg.tasks[0].env)
    task = cfg.tasks[0]
    setup = TaskSetup(
        0,
        task.key,
        task.env,
        task.num_envs,
        0,
        1.0,
        spec.observation_space,
        spec.action_space,
    )
    model = MultiTaskModel(
        [TaskSpaces(spec.observation_space, spec.action_space)], cfg.learner.model
    ).to(resolve_device(cfg.learner.device))
    learner = ImpalaLearner(model, cfg.learner, [task.key])
    envs = [spec.build(task.num_envs, s) for s in range(cfg.scheduler.num_actors)]
    pools = [SerialPool([setup], [e], UNROLL, InferenceModel(model, shared=True)) for e in envs]
    unrolls = [ru for p in pools for ru in p.get()]
    return model, learner, unrolls, pools


def stage_inference(cfg: Any, model: MultiTaskModel, unrolls: list, seconds: float) -> float:
    """(c) env steps/s that batched inference alone can serve (one forward per actor batch)."""
    inf = InferenceModel(model)
    rows = [u.buffer.obs[t] for u in unrolls for t in range(UNROLL)]
    i = [0]

    def act() -> int:
        obs = rows[i[0] % len(rows)]
        raw, _, _ = inf.act(0, obs)
        env_actions(cfg_space[0], raw)
        i[0] += 1
        return len(obs)

    cfg_space = [get_plugins().envs.get(cfg.tasks[0].env).action_space]
    units, dt = _timed(act, seconds)
    return units / dt


def interference(w: dict[str, Any], model: MultiTaskModel, steps: int = 3000) -> dict[str, float]:
    """Microseconds per ``env.step`` of one batch env stepped alone, and right after a model
    forward on the same thread (what the serial loop does): the cost of sharing one core."""
    spec = get_plugins().envs.get(w["env"])
    env = spec.build(w["num_envs"], 0)
    obs = env.reset()
    inf = InferenceModel(model, shared=True)
    space = env.single_action_space
    out: dict[str, float] = {}
    try:
        for label, with_forward in (("alone", False), ("after_forward", True)):
            rng = np.random.default_rng(0)
            total = 0.0
            for _ in range(steps):
                if with_forward:
                    raw, _, _ = inf.act(0, obs)
                    actions = env_actions(space, raw)
                else:
                    actions = random_actions(space, w["num_envs"], rng)
                t0 = time.perf_counter()
                obs = env.step(actions).obs
                total += time.perf_counter() - t0
            out[f"env_step_us_{label}"] = total / steps * 1e6
    finally:
        env.close()
    return out


def stage_learner(learner: ImpalaLearner, unrolls: list, seconds: float) -> float:
    """(b) env steps/s that learner updates alone consume (the same batch replayed)."""
    batches = [task_batch(u.buffer, learner.device) for u in unrolls]
    per_update = sum(b.num_samples for b in batches)

    def update() -> int:
        learner.update(batches)
        return per_update

    units, dt = _timed(update, seconds, learner.device)
    return units / dt


def end_to_end(w: dict[str, Any], mode: str, seconds: float, warmup_s: float) -> dict[str, Any]:
    """Training steps/s of ``mode`` after ``warmup_s`` (actor start-up excluded)."""
    with tempfile.TemporaryDirectory() as tmp:
        # Size the run by a first guess of the rate, generous so it lasts past the warm-up.
        cfg = _config(w, mode, 10**9, tmp)
        trainer = TimedTrainer(cfg, warmup_s + seconds, console=False)
        try:
            trainer.run()
        finally:
            trainer.close()
        records = [json.loads(x) for x in (trainer.run_dir / "metrics.jsonl").open()]
    first_t = next(r["charts/elapsed_s"] for r in records if r["charts/env_steps"] > 0)
    window = [r for r in records if r["charts/elapsed_s"] >= first_t + warmup_s]
    a, b = window[0], window[-1]
    sps = (b["charts/env_steps"] - a["charts/env_steps"]) / (
        b["charts/elapsed_s"] - a["charts/elapsed_s"]
    )
    lag = [r.get("charts/policy_lag") for r in window if r.get("charts/policy_lag") is not None]
    return {"sps": sps, "policy_lag_mean": float(np.mean(lag)) if lag else None}


def measure_once(w: dict[str, Any], modes: list[str], seconds: float) -> dict[str, Any]:
    """Stages (a), (c), (b) then end-to-end in each mode, back to back."""
    cfg = _config(w, "serial", 1, "/tmp")
    model, learner, unrolls, pools = _model_and_unrolls(cfg)
    res: dict[str, Any] = {"a_env_sps": stage_env(w, seconds)}
    if w["env"].startswith("envpool/"):
        res["a1_env_one_pool_sps"] = stage_env_one_pool(w, seconds)
    res["c_inference_sps"] = stage_inference(cfg, model, unrolls, seconds)
    res["b_learner_sps"] = stage_learner(learner, unrolls, seconds)
    res["interference"] = interference(w, model, w.get("interference_steps", 3000))
    for p in pools:
        p.close()
    a, b, c = res["a_env_sps"], res["b_learner_sps"], res["c_inference_sps"]
    res["limit_shared_cores_sps"] = 1 / (1 / a + 1 / b + 1 / c)
    res["limit_separate_hw_sps"] = min(a, b, c)
    for mode in modes:
        e2e = end_to_end(w, mode, seconds * 2, warmup_s=3.0)
        e2e["vs_shared_limit"] = e2e["sps"] / res["limit_shared_cores_sps"]
        e2e["vs_separate_limit"] = e2e["sps"] / res["limit_separate_hw_sps"]
        e2e["vs_env"] = e2e["sps"] / a
        if "a1_env_one_pool_sps" in res:
            e2e["vs_env_one_pool"] = e2e["sps"] / res["a1_env_one_pool_sps"]
        res[f"end_to_end_{mode}"] = e2e
    return res


def run(workloads: list[str], modes: list[str], seconds: float, repeat: int) -> dict[str, Any]:
    """Each workload measured ``repeat`` times; the median ratio per mode is the figure."""
    torch.set_num_threads(1)
    out: dict[str, Any] = {
        "machine": machine(),
        "seconds_per_stage": seconds,
        "repeat": repeat,
        "workloads": {},
    }
    for name in workloads:
        w = WORKLOADS[name]
        reps = []
        for r in range(repeat):
            reps.append(measure_once(w, modes, seconds))
            _print(f"{name} (repeat {r + 1}/{repeat})", {**reps[-1], "settings": w}, modes)
        res: dict[str, Any] = {"settings": {**w, "unroll_length": UNROLL}, "repeats": reps}
        for mode in modes:
            ratios = [x[f"end_to_end_{mode}"]["vs_shared_limit"] for x in reps]
            res[f"median_vs_shared_limit_{mode}"] = float(np.median(ratios))
            res[f"median_vs_separate_limit_{mode}"] = float(
                np.median([x[f"end_to_end_{mode}"]["vs_separate_limit"] for x in reps])
            )
            print(
                f"{name} {mode}: ratios {[round(x, 2) for x in ratios]}, median "
                f"{np.median(ratios):.2f}"
            )
        out["workloads"][name] = res
    return out


def _print(name: str, r: dict[str, Any], modes: list[str]) -> None:
    print = functools.partial(builtins.print, flush=True)
    print(f"\n== {name}: {r['settings']}")
    print(f"(a) env stepping     {r['a_env_sps']:>12,.0f} steps/s")
    if "a1_env_one_pool_sps" in r:
        print(f"(a1) one pool of all {r['a1_env_one_pool_sps']:>11,.0f} steps/s")
    print(f"(c) inference        {r['c_inference_sps']:>12,.0f} steps/s")
    print(f"(b) learner          {r['b_learner_sps']:>12,.0f} steps/s")
    print(f"limit 1/(1/a+1/b+1/c){r['limit_shared_cores_sps']:>12,.0f} steps/s")
    print(f"limit min(a,b,c)     {r['limit_separate_hw_sps']:>12,.0f} steps/s")
    i = r["interference"]
    print(
        f"one env.step: {i['env_step_us_alone']:.0f} us alone, "
        f"{i['env_step_us_after_forward']:.0f} us right after a model forward"
    )
    for mode in modes:
        e = r[f"end_to_end_{mode}"]
        one_pool = f", {e['vs_env_one_pool']:.2f} x (a1)" if "vs_env_one_pool" in e else ""
        print(
            f"end-to-end {mode:<9} {e['sps']:>12,.0f} steps/s  = {e['vs_shared_limit']:.2f} x limit"
            f", {e['vs_separate_limit']:.2f} x min(a,b,c), {e['vs_env']:.2f} x (a){one_pool}"
            f"  (policy lag {e['policy_lag_mean']})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument(
        "--modes",
        nargs="+",
        default=["serial", "process", "process-central"],
        help="actor modes, an inference arrangement after a dash: process-central, "
        "process-local (process alone: the default, auto)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="measurements per workload (median)")
    args = ap.parse_args()
    out = run(args.workloads, args.modes, args.seconds, args.repeat)
    print(f"\nwritten to {write_result('throughput', out)}")


if __name__ == "__main__":
    main()
