"""An agent steering an ensemble of simulations against the classic designs, on the same studies.

    python benchmarks/steer_outbreak.py [--seeds 0,1,2,3,4] [--steps N] [--studies 200]

The study is ``scisim/outbreak-boundary`` (plugins_contrib/mtrl-scisim): map where a stochastic
SIR epidemic more likely than not becomes a major outbreak, 4 simulations a step, 48 in all;
its figure is the misclassified share of the parameter square after each batch. For each
training seed, ``mtrl train CONFIG --seed S`` (a subprocess, ``--steps`` env steps), then its
*final* agent runs ``--studies`` fresh studies (greedy and stochastic actions); every baseline of
:mod:`mtrl_scisim.steer_baselines` (random points, Latin hypercube, Optuna's TPE, uncertainty
sampling) runs the same studies — same hidden ``r0_low``, same simulation streams — so the
comparison is paired by study. The study seeds (from ``STUDY_SEED``) are apart from every
training seed and from the seeds the uncertainty baseline's weight was picked on.

Prints the figure after 16, 32 and 48 simulations per method (mean over studies; for the agent,
the mean over training seeds with their range), writes ``docs/results/steer_outbreak.json`` and
a plot of the figure against simulations run (``steer_outbreak.png``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from _common import RESULTS, machine, write_result
from learning_runs import find_run_dir

from mtrl.actors.inference import make_policy
from mtrl.config import load_config
from mtrl.learner.model import TaskSpaces
from mtrl.plugins import get_plugins
from mtrl.train.evaluate import build_model, load_for_eval, load_model

ROOT = Path(__file__).resolve().parent.parent
STUDY_SEED = 500_000
"""First study seed of the evaluation (studies ``STUDY_SEED .. STUDY_SEED + studies - 1``)."""
MARKS = (16, 32, 48)
MEMBERS = 4
"""Simulations per batch (the env's default ``members``): a curve's column ``j`` is after ``4j``."""


def _study_env(n: int, env_kwargs: dict[str, Any]) -> Any:
    """``n`` studies, copy ``j`` the study of seed ``STUDY_SEED + j`` (as ``run_study`` makes
    it: a copy's draws depend on its own seed only)."""
    from mtrl_scisim.steer import OutbreakBoundaryBatchEnv

    return OutbreakBoundaryBatchEnv(n, STUDY_SEED, **env_kwargs)


def baseline_curves(method: str, studies: int) -> np.ndarray:
    """``[studies, batches + 1]`` misclassified share before and after each batch."""
    from mtrl_scisim.steer_baselines import run_study

    return np.stack([run_study(method, STUDY_SEED + j) for j in range(studies)])


def agent_curves(run_dir: Path, studies: int, greedy: bool) -> np.ndarray:
    """The run's final agent on the evaluation studies: ``[studies, batches + 1]``."""
    plugins = get_plugins()
    ckpt = load_for_eval(run_dir, plugins)
    env = _study_env(studies, dict(ckpt.config.tasks[0].env_kwargs))
    spaces = [TaskSpaces(env.single_observation_space, env.single_action_space)]
    return play(load_model(ckpt, spaces, "cpu", plugins), env, greedy)


def untrained_curves(config: Path, seed: int, studies: int, greedy: bool) -> np.ndarray:
    """The same agent before any update (the model as seed ``seed`` initialises it): what
    the strategy's parameterisation gives by itself, so what training added shows."""
    cfg = load_config(config)
    env = _study_env(studies, dict(cfg.tasks[0].env_kwargs))
    spaces = [TaskSpaces(env.single_observation_space, env.single_action_space)]
    torch.manual_seed(seed)
    return play(build_model(cfg, spaces, get_plugins()).eval(), env, greedy)


def play(model: torch.nn.Module, env: Any, greedy: bool) -> np.ndarray:
    """``model`` runs every study of ``env`` once: ``[studies, batches + 1]``."""
    studies = env.num_envs
    torch.manual_seed(STUDY_SEED)
    policy = make_policy(model, [env.single_action_space], greedy=greedy)
    obs = env.reset()
    curve = [env.error.copy()]
    valid = np.ones(studies, bool)
    with torch.no_grad():
        for _ in range(env.steps_per_study):
            _, actions, _ = policy(0, obs, valid)
            obs = env.step(actions).obs
            curve.append(env.last_error.copy())
    return np.stack(curve, axis=1)


def train(config: Path, seed: int, steps: int, work_dir: Path) -> tuple[Path, float]:
    """``mtrl train`` of one seed, its runs under ``work_dir``; (run dir, wall seconds)."""
    data = yaml.safe_load(config.read_text())
    data["tracking"] = {**data.get("tracking", {}), "run_dir": str(work_dir)}
    data["tracking"]["wandb"] = {"mode": "disabled"}
    data["actors"] = {**data.get("actors", {}), "mode": "serial"}  # as measured (BENCHMARKS)
    seed_config = work_dir / f"seed{seed}.yaml"
    seed_config.write_text(yaml.safe_dump(data, sort_keys=False))
    cmd = [sys.executable, "-m", "mtrl.cli", "train", str(seed_config), "--seed", str(seed)]
    cmd += ["--total-env-steps", str(steps)]
    t0 = time.perf_counter()
    env = {**os.environ, "WANDB_MODE": "disabled"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    log = work_dir / f"seed{seed}.train.log"
    log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    run_dir = find_run_dir(proc.stdout, work_dir, data["name"], seed)
    if proc.returncode != 0 or run_dir is None:
        raise SystemExit(f"seed {seed}: mtrl train failed (exit {proc.returncode}); see {log}")
    return run_dir, wall


def summary(curves: np.ndarray) -> dict[str, Any]:
    """Mean and standard error over studies at each mark (simulations run)."""
    out: dict[str, Any] = {"mean_curve": curves.mean(0).round(5).tolist()}
    for m in MARKS:
        col = curves[:, m // MEMBERS]
        out[f"at_{m}"] = {"mean": float(col.mean()), "se": float(col.std() / np.sqrt(len(col)))}
    return out


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    sims = np.arange(0, MARKS[-1] + 1, MEMBERS)
    for name, res in results["baselines"].items():
        ax.plot(sims, res["mean_curve"], "--", label=name)
    for mode in ("greedy", "stochastic"):
        seeds = np.array([s[mode]["mean_curve"] for s in results["agent"]["seeds"]])
        (line,) = ax.plot(sims, seeds.mean(0), lw=2, label=f"agent ({mode})")
        ax.fill_between(sims, seeds.min(0), seeds.max(0), color=line.get_color(), alpha=0.2)
    start = np.array([e["greedy"]["mean_curve"] for e in results["untrained"]["seeds"]])
    ax.plot(sims, start.mean(0), ":", color="grey", label="agent before training (greedy)")
    ax.set_xlabel("simulations run")
    ax.set_ylabel("misclassified share of the square")
    ax.set_yscale("log")
    ax.set_title(f"outbreak boundary, {results['studies']} studies; agent: seeds' range")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "steer_outbreak.yaml")
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--steps", type=int, default=None, help="env steps per training seed")
    p.add_argument("--studies", type=int, default=200, help="evaluation studies per method")
    p.add_argument("--work-dir", type=Path, default=Path("runs/bench_steer_outbreak"))
    p.add_argument("--name", default="steer_outbreak")
    p.add_argument("--methods", default="random,lhs,tpe,uncertainty")
    args = p.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    steps = args.steps or int(yaml.safe_load(args.config.read_text())["total_env_steps"])
    args.work_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "command": " ".join(["python benchmarks/steer_outbreak.py", *(argv or sys.argv[1:])]),
        "machine": machine(),
        "config": str(args.config),
        "steps_per_seed": steps,
        "studies": args.studies,
        "study_seed": STUDY_SEED,
        "baselines": {},
        "agent": {"seeds": []},
        "untrained": {"seeds": []},
    }
    for method in args.methods.split(","):
        t0 = time.perf_counter()
        results["baselines"][method] = summary(baseline_curves(method, args.studies))
        at48 = results["baselines"][method]["at_48"]
        print(
            f"{method:12s} after 48: {at48['mean']:.4f} ± {at48['se']:.4f} "
            f"({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    for seed in seeds:
        start: dict[str, Any] = {"seed": seed}
        for mode in ("greedy", "stochastic"):
            curves = untrained_curves(args.config, seed, args.studies, mode == "greedy")
            start[mode] = summary(curves)
        results["untrained"]["seeds"].append(start)
    for seed in seeds:
        run_dir, wall = train(args.config, seed, steps, args.work_dir)
        entry: dict[str, Any] = {"seed": seed, "run_dir": str(run_dir), "train_wall_s": wall}
        for mode in ("greedy", "stochastic"):
            entry[mode] = summary(agent_curves(run_dir, args.studies, mode == "greedy"))
        results["agent"]["seeds"].append(entry)
        print(
            f"agent seed {seed} ({wall:.0f} s): greedy {entry['greedy']['at_48']['mean']:.4f}, "
            f"stochastic {entry['stochastic']['at_48']['mean']:.4f} after 48",
            flush=True,
        )
    print(f"\n{'method':22s}" + "".join(f"{'after ' + str(m):>22s}" for m in MARKS))
    for method, res in results["baselines"].items():
        cells = "".join(
            f"{res[f'at_{m}']['mean']:>13.4f} ± {res[f'at_{m}']['se']:.4f}" for m in MARKS
        )
        print(f"{method:22s}{cells}")
    for who in ("agent", "untrained"):
        for mode in ("greedy", "stochastic"):
            cells = ""
            for m in MARKS:
                per_seed = [e[mode][f"at_{m}"]["mean"] for e in results[who]["seeds"]]
                results[who][f"{mode}_at_{m}"] = {
                    "mean": float(np.mean(per_seed)),
                    "min": min(per_seed),
                    "max": max(per_seed),
                }
                cells += f"{np.mean(per_seed):>9.4f} [{min(per_seed):.3f}, {max(per_seed):.3f}]"
            print(f"{who + ' ' + mode:22s}{cells}")
    path = write_result(args.name, results)
    plot(results, RESULTS / f"{args.name}.png")
    print(f"wrote {path} and {args.name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
