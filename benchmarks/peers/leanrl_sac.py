"""mtrl's SAC beside LeanRL's compiled SAC script on the same task and network shapes.

LeanRL (pytorch-labs/LeanRL) is CleanRL's SAC rewritten for speed: ``torch.compile`` of the
critic and policy updates, ``torch.vmap`` over the twin critics, tensordict parameters, CUDA
graphs on a GPU. Its script runs unmodified in its own venv (``benchmarks/peers/leanrl``,
venv ``leanrl``: gymnasium 0.29 and MuJoCo 2.3.7, the versions it was written for) on
HalfCheetah-v4, on the CPU, compiled (``--compile``) and eager; mtrl's SAC runs
``benchmarks/configs/sac_half_cheetah_leanrl.yaml`` (HalfCheetah-v5 from mtrl's own gymnasium:
the same model, the env step is ~1 % of a step here) in this process. Every side: one env, one
torch thread, networks of two 256-wide ReLU layers, batch 256, one gradient step per env step
after 5,000 random steps. The figure is each side's env steps per second in the learning phase
(LeanRL's own ``speed``: from a few steps past ``learning_starts``, compilation excluded;
mtrl's: from 200 steps past ``learning_starts`` to the end), the sides taking turns round by
round, the median of the rounds reported.

    .venv/bin/python benchmarks/peers/leanrl_sac.py --rounds 3 --steps 3000
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(HERE))
from _common import machine, write_result  # noqa: E402
from venvs import ensure, python_of  # noqa: E402

CONFIG = ROOT / "benchmarks" / "configs" / "sac_half_cheetah_leanrl.yaml"
LEARNING_STARTS = 5000
BURN_IN = 200


def leanrl(compiled: bool, steps: int, seed: int) -> dict[str, Any]:
    """One run of LeanRL's script in its venv: its speed over ``steps`` learning env steps."""
    cmd = [
        str(python_of("leanrl")),
        str(HERE / "leanrl" / "run.py"),
        "--",
        "--env-id",
        "HalfCheetah-v4",
        "--no-cuda",
        "--compile" if compiled else "--no-compile",
        "--total-timesteps",
        str(LEARNING_STARTS + steps),
        "--seed",
        str(seed),
    ]
    env = {"OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"LeanRL's script failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])


def mtrl(steps: int, seed: int) -> dict[str, Any]:
    """One run of mtrl's SAC in this process: env steps per second while learning."""
    import tempfile

    import torch
    import yaml

    from mtrl.config import parse_config
    from mtrl.plugins import get_plugins
    from mtrl.train.trainer import Trainer

    class Clocked(Trainer):
        """Records (time, env steps) at every unroll."""

        marks: list[tuple[float, int]]

        def on_unroll(self, task: int, info: Any) -> None:
            super().on_unroll(task, info)
            self.marks.append((time.perf_counter(), self.env_steps))

    data = yaml.safe_load(CONFIG.read_text())
    with tempfile.TemporaryDirectory() as run_dir:
        data.update(seed=seed, total_env_steps=LEARNING_STARTS + steps)
        data["tracking"].update(run_dir=run_dir, console="quiet")
        data["checkpoint"] = {"enabled": False}
        cfg = parse_config(yaml.safe_dump(data), CONFIG, **get_plugins().config_context())
        torch.set_num_threads(1)
        trainer = Clocked(cfg)
        trainer.marks = []
        trainer.run()
    marks = [(t, s) for t, s in trainer.marks if s >= LEARNING_STARTS + BURN_IN]
    (t0, s0), (t1, s1) = marks[0], marks[-1]
    return {"env_steps_per_s": (s1 - s0) / (t1 - t0), "measured_steps": s1 - s0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3000, help="learning env steps per run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    ensure("leanrl")
    sides = {
        "leanrl_compiled": lambda: leanrl(True, args.steps, args.seed),
        "leanrl_eager": lambda: leanrl(False, args.steps, args.seed),
        "mtrl": lambda: mtrl(args.steps, args.seed),
    }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for round_ in range(args.rounds):
        for name, run in sides.items():
            result = run()
            runs[name].append(result)
            print(
                f"round {round_ + 1}, {name}: {result['env_steps_per_s']:.1f} env steps/s",
                flush=True,
            )
    median = {n: statistics.median(r["env_steps_per_s"] for r in rs) for n, rs in runs.items()}
    for name, value in median.items():
        print(f"{name}: {value:.1f} env steps/s (median of {args.rounds})")
    print(f"mtrl / LeanRL compiled: {median['mtrl'] / median['leanrl_compiled']:.2f}x")
    payload = {
        "benchmark": "leanrl_sac",
        "machine": machine(),
        "config": str(CONFIG.relative_to(ROOT)),
        "leanrl_commit": "8dbb6336b7f6cc65cdbbeb2e86637c38867e2677",
        "steps": args.steps,
        "runs": runs,
        "median_env_steps_per_s": median,
    }
    print(f"wrote {write_result('peers_leanrl_sac', payload, args.out_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
