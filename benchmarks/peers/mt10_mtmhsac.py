"""A public multi-task SAC on MT10 beside mtrl's: the Meta-World+ authors' multi-task
multi-head SAC (MTMHSAC, ``rainx0r/metaworld-algorithms``, JAX), on this machine and
Meta-World version, its curve and final agent in the shape ``benchmarks/metaworld_figure.py`` reads.

Each seed is one ``mt10_mtmhsac_run.py`` in the ``metaworld_algorithms`` peer venv (Python 3.12,
JAX's CPU build, Meta-World 3.1.1, MuJoCo 3.3.0; built once by ``venvs.py`` from a local clone
named by ``METAWORLD_ALGORITHMS_SRC``), with one XLA and one OpenMP thread, seeds one after the
other. The runner trains with the authors' published MT10 settings (``examples/multi_task/
mtmhsac_mt10.py``: actor and critics of 3 x 400 units with a head per task, twin critics,
batch 1,280, one gradient step per 10 env steps, 40,000 random env steps first, replay of 1M,
Adam 3e-4 with gradients clipped at 1, a learned temperature per task), only the env-step
budget and the seed set here, records ``metrics.jsonl`` in mtrl's keys, and evaluates the final
agent by mtrl's protocol (greedy, 50 episodes per task over its goals, success if any step
succeeds) and by the authors' (see the runner's docstring for what differs). The runner keeps
the authors' checkpoints (one at each of their evaluations, every 200,000 env steps, replay
included): a run stopped part-way goes on from its newest with ``--resume`` (same arguments).

    .venv-metaworld/bin/python benchmarks/peers/mt10_mtmhsac.py --seed-list 1 \\
        --total-env-steps 500000 --name mt10_mtmhsac_500k_s1
    # writes docs/results/learning_<name>.json; the runs go to runs/bench/<name>/seed<k>/
    .venv-metaworld/bin/python benchmarks/metaworld_figure.py --arm sac=... \\
        --arm mtmhsac=docs/results/learning_mt10_mtmhsac_500k_s1.json
"""

from __future__ import annotations

import argparse
import json
import os
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
from venvs import METAWORLD_ALGORITHMS_COMMIT, PEERS, ensure, python_of  # noqa: E402

PEER = "metaworld_algorithms"
RUNNER = HERE / "mt10_mtmhsac_run.py"
#: One thread for XLA's CPU client and for OpenMP. These alone did not hold it to one core (XLA's
#: Eigen threads kept a second core busy: ~190 % of a core in ``top``), so the runner is also
#: pinned to one CPU (:func:`last_cpu`, ``--cpu``): the run uses one core, as mtrl's runs do.
THREAD_ENV = {
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "JAX_PLATFORMS": "cpu",
    "WANDB_MODE": "disabled",
}
#: The authors' published MT10 settings the runner uses (recorded with each result).
HYPERPARAMETERS = {
    "source": "examples/multi_task/mtmhsac_mt10.py",
    "networks": "actor and twin critics: MLP 3 x 400, ReLU, He-uniform, a head per task",
    "batch_size": 1280,
    "gradient_steps_per_env_step": 0.1,
    "warmstart_env_steps": 40_000,
    "buffer_size": 1_000_000,
    "optimizer": "Adam lr 3e-4 eps 1e-5, global-norm clip 1.0 (actor, critics)",
    "gamma": 0.99,
    "tau": 0.005,
    "temperature": "one per task, initial 1.0, target entropy -4",
    "published_total_env_steps": 20_000_000,
}


def last_cpu() -> int:
    """The highest-numbered CPU this process may run on (where the peer is pinned by
    default)."""
    return max(os.sched_getaffinity(0))


def run_seed(
    seed: int,
    total: int,
    run_dir: Path,
    eval_episodes: int,
    record_every: int,
    warmstart: int | None,
    resume: bool,
    cpu: int,
) -> dict[str, Any]:
    """One seed in the peer venv, pinned to CPU ``cpu``; its ``result.json`` with the run dir
    and the command added. ``resume``: continue from the run dir's newest checkpoint, if there
    is one."""
    cmd = [
        str(python_of(PEER)),
        str(RUNNER),
        "--seed",
        str(seed),
        "--total-env-steps",
        str(total),
        "--run-dir",
        str(run_dir),
        "--eval-episodes",
        str(eval_episodes),
        "--record-every",
        str(record_every),
    ]
    if warmstart is not None:
        cmd += ["--warmstart-env-steps", str(warmstart)]
    if resume:
        cmd.append("--resume")
    run_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **THREAD_ENV}
    t0 = time.perf_counter()
    with (run_dir / "train.log").open("a" if resume else "w") as log:
        proc = subprocess.run(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            check=False,
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
        )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (run_dir / "train.log").read_text()[-3000:]
        return {"seed": seed, "run_dir": str(run_dir), "error": tail, "wall_s": wall}
    result = json.loads((run_dir / "result.json").read_text())
    result.update(run_dir=str(run_dir), error=None, wall_s=wall, command=cmd)
    return result


def _git(*args: str) -> str | None:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return out.stdout.strip() if out.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed-list", default="1", help="comma-separated seeds, run in turn")
    ap.add_argument("--total-env-steps", type=int, default=500_000, help="env steps in all")
    ap.add_argument("--eval-episodes", type=int, default=50, help="per task, final agent")
    ap.add_argument("--record-every", type=int, default=10_000, help="env steps per record")
    ap.add_argument(
        "--warmstart-env-steps",
        type=int,
        default=None,
        help="override the authors' 40,000 random env steps (smoke runs only; recorded)",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="continue each seed from its run dir's newest checkpoint (every 200k env steps)",
    )
    ap.add_argument(
        "--cpu", type=int, default=None, help="the CPU the peer runs on (default: the last)"
    )
    ap.add_argument("--name", default=None, help="result name (learning_<name>.json)")
    ap.add_argument("--work-dir", type=Path, default=None, help="default runs/bench/<name>")
    ap.add_argument("--out-dir", type=Path, default=None, help="default docs/results")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seed_list.split(",") if s]
    name = args.name or f"mt10_mtmhsac_{args.total_env_steps}"
    work_dir = (args.work_dir or ROOT / "runs" / "bench" / name).resolve()
    build_s = ensure(PEER)
    cpu = last_cpu() if args.cpu is None else args.cpu
    t0 = time.perf_counter()
    runs = []
    for seed in seeds:
        print(f"seed {seed}: {args.total_env_steps} env steps in {work_dir}", flush=True)
        run = run_seed(
            seed,
            args.total_env_steps,
            work_dir / f"seed{seed}",
            args.eval_episodes,
            args.record_every,
            args.warmstart_env_steps,
            args.resume,
            cpu,
        )
        runs.append(run)
        if run["error"]:
            print(f"seed {seed} failed:\n{run['error']}", flush=True)
            continue
        greedy = [t["greedy_success"] for t in run["tasks"].values()]
        print(
            f"seed {seed}: {run['env_steps']} env steps in {run['train_wall_s']:.0f} s "
            f"({run['env_steps_per_s']:.1f} env steps/s; learning phase "
            f"{run['env_steps_per_s_learning'] or float('nan'):.1f}, per CPU second "
            f"{run.get('env_steps_per_cpu_s_learning') or float('nan'):.1f}); greedy success "
            f"{sum(greedy) / len(greedy):.3f} (mtrl's protocol), "
            f"{run['peer_protocol_eval']['mean_success_rate']:.3f} (the authors')",
            flush=True,
        )
    payload = {
        "benchmark": "learning",
        "name": name,
        "peer": {
            "name": "metaworld-algorithms MTMHSAC (Meta-World+ authors)",
            "repository": "rainx0r/metaworld-algorithms",
            "commit": METAWORLD_ALGORITHMS_COMMIT,
            "venv": PEER,
            "requirements": PEERS[PEER],
            "hyperparameters": HYPERPARAMETERS,
            "warmstart_env_steps_override": args.warmstart_env_steps,
            "thread_env": THREAD_ENV,
            "cpu": cpu,
            "venv_build_s": build_s,
        },
        "seeds": seeds,
        "total_env_steps": args.total_env_steps,
        "eval_episodes": args.eval_episodes,
        "eval_protocol": "greedy; episode k of each task on its goal k; success if any step",
        "work_dir": str(work_dir),
        "tasks": sorted({t for r in runs if not r["error"] for t in r["tasks"]}),
        "runs": runs,
        "wall_s_total": time.perf_counter() - t0,
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain")),
        "machine": machine(),
    }
    print(f"wrote {write_result(f'learning_{name}', payload, args.out_dir)}")
    return 1 if any(r["error"] for r in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
