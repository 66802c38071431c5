"""Multi-task vs one-by-one: env steps and wall time for each task to first reach its target.

    .venv/bin/python benchmarks/multitask_vs_single.py
    # writes docs/results/multitask_vs_single.json
    .venv/bin/python benchmarks/multitask_vs_single.py \
        --arms sum,pcgrad,cagrad,moe,moore,soft_modular --seeds 0,1,2,3,4
    # each seed: every arm's joint run and the tasks alone, side by side
    # (docs/results/multitask_vs_single_arms.json)

The classic suite (classic control + a MinAtar game) is trained once as one multi-task run and
once per task alone, with the same settings (serial actors, the same model, learning rate,
unroll length, PopArt, envs per task; each update takes one unroll of every task in the run, so
a task gets the same data per update either way). A task reaches its target when the mean of
its last 20 episodes first is >= ``target``, checked after every unroll. A run stops when every
task of it has reached its target or hit its step cap (per task; the joint run's cap is the
sum; every run also stops after ``--max-seconds``). Reported per task: its own env steps and
the run's wall seconds at that moment; totals: the sum of the solo runs' wall times against the
joint run's. A task's env seeds are the same in both.

MountainCar-v0 is left out: with these settings it stays at −200 (a random walk almost never
reaches the flag, so there is no reward signal to learn from) and would only burn its cap.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

from mtrl.actors.protocol import UnrollInfo
from mtrl.config import ExperimentConfig, parse_config
from mtrl.plugins import get_plugins
from mtrl.train.trainer import RECENT_EPISODES, Trainer

#: (env id, target mean return, env steps cap for the task).
TASKS: list[tuple[str, float, int]] = [
    ("gymnasium/CartPole-v1", 475.0, 600_000),
    ("gymnasium/Acrobot-v1", -100.0, 1_500_000),
    ("gymnasium/Pendulum-v1", -200.0, 1_200_000),
    ("minatar/breakout", 5.0, 800_000),
]

SETTINGS: dict[str, Any] = {
    "num_envs": 16,
    "unroll_length": 20,
    "learning_rate": 6e-4,
    "encoder_dim": 64,
    "torso": [64],
    "popart_beta": 0.01,
    "entropy_coef": 0.003,
    "actors": "serial",
    "seed": 0,
}


class TargetWatch(Trainer):
    """A trainer that notes when each task first reaches its target and stops when all did
    (or hit their step caps, or ``max_seconds`` passed)."""

    def __init__(
        self, cfg: ExperimentConfig, caps: list[int], max_seconds: float, **kw: Any
    ) -> None:
        super().__init__(cfg, **kw)
        self.caps = caps
        self.max_seconds = max_seconds
        self.hits: list[dict[str, float] | None] = [None] * len(cfg.tasks)
        self.t0 = time.perf_counter()

    def start_clock(self) -> None:
        self.t0 = time.perf_counter()

    def on_unroll(self, task: int, info: UnrollInfo) -> None:
        i, p = task, self.progress[task]
        target = self.cfg.tasks[i].target_score
        mean = sum(p.returns) / len(p.returns) if p.returns else None
        if (
            self.hits[i] is None
            and target is not None
            and mean is not None
            and p.episodes >= RECENT_EPISODES
            and mean >= target
        ):
            self.hits[i] = {
                "env_steps": p.env_steps,
                "run_env_steps": self.env_steps,
                "wall_s": time.perf_counter() - self.t0,
                "mean_return": mean,
            }
        done = [
            h is not None or q.env_steps >= cap
            for h, q, cap in zip(self.hits, self.progress, self.caps, strict=True)
        ]
        if all(done) or time.perf_counter() - self.t0 > self.max_seconds:
            self.request_stop()


#: Settings compared in the joint run (``--arms``): how the tasks' torso gradients combine and
#: what the torso is (docs/ALGORITHMS.md); ``sum`` with the plain MLP is mtrl's default.
ARMS: dict[str, dict[str, str]] = {
    "sum": {},
    "pcgrad": {"gradients": "pcgrad"},
    "cagrad": {"gradients": "cagrad"},
    "moe": {"mixture": "moe"},
    "moore": {"mixture": "moore"},
    # soft modularization routes between layers: two of the torso's width
    "soft_modular": {"mixture": "soft_modular", "torso": "[64, 64]"},
    # The scheduler's `progress` policy in serial mode: turns move from solved tasks to the
    # ones still short of their targets (each keeps a quarter of its equal share).
    "sum+progress": {"policy": "progress"},
    "cagrad+progress": {"gradients": "cagrad", "policy": "progress"},
    "soft_modular+progress": {
        "mixture": "soft_modular",
        "torso": "[64, 64]",
        "policy": "progress",
    },
    # ... with a solved task kept at a tenth of its equal share (the default floor: a quarter)
    "cagrad+progress0.1": {"gradients": "cagrad", "policy": "progress", "floor": "0.1"},
}

#: The scheduler's settings for an arm with a policy: decisions every 5 s (a joint run here
#: lasts 1-3 minutes), each task warm after its first 5 s.
SCHEDULER = "{{policy: {policy}, rebalance_every_s: 5, warmup_s: 5, progress_floor: {floor}}}"


def make_config(
    tasks: list[tuple[str, float, int]], run_dir: str, arm: str = "sum"
) -> ExperimentConfig:
    """The benchmark's config for ``tasks`` (one run), with the shared settings and ``arm``'s."""
    s = SETTINGS
    kind = ARMS[arm].get("mixture")
    mixture = f", torso_mixture: {{kind: {kind}}}" if kind else ""
    torso = ARMS[arm].get("torso", s["torso"])
    lines = [
        f"name: mvs\nseed: {s['seed']}\ntotal_env_steps: {sum(c for _, _, c in tasks)}",
        "tasks:",
    ]
    for env, target, _ in tasks:
        # A task's env seed is the same in the joint run and in its solo run.
        seed = s["seed"] + [t[0] for t in TASKS].index(env)
        lines.append(
            f"  - {{env: {env}, num_envs: {s['num_envs']}, target_score: {target}, seed: {seed}}}"
        )
    lines += [
        f"actors: {{mode: {s['actors']}}}",
        "scheduler: "
        + SCHEDULER.format(
            policy=ARMS[arm].get("policy", "fixed"), floor=ARMS[arm].get("floor", "0.25")
        ),
        "learner:",
        f"  unroll_length: {s['unroll_length']}",
        f"  batch_size: {s['num_envs'] * len(tasks)}",
        f"  learning_rate: {s['learning_rate']}",
        f"  entropy_coef: {s['entropy_coef']}",
        f"  popart: {{beta: {s['popart_beta']}}}",
        f"  model: {{encoder_dim: {s['encoder_dim']}, torso: {torso}{mixture}}}",
        f"  multitask: {{gradients: {ARMS[arm].get('gradients', 'sum')}}}",
        f"tracking: {{run_dir: {run_dir}, console: quiet, csv: false, log_every_s: 30,"
        " wandb: {mode: disabled}}",
        "checkpoint: {enabled: false}",
    ]
    return parse_config("\n".join(lines) + "\n", env_ids=get_plugins().envs.ids())


def _load() -> float:
    return os.getloadavg()[0]


def run(
    tasks: list[tuple[str, float, int]], max_seconds: float, label: str, arm: str = "sum"
) -> dict[str, Any]:
    """Train ``tasks`` together in one run; per-task first-hit records and the run's totals."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = make_config(tasks, tmp, arm)
        load0 = _load()
        trainer = TargetWatch(
            cfg, [c for _, _, c in tasks], max_seconds, console=False, write_run_dir=False
        )
        try:
            trainer.start_clock()
            res = trainer.run()
        finally:
            trainer.close()
    out: dict[str, Any] = {
        "wall_s": res.seconds,
        "env_steps": res.env_steps,
        "updates": res.updates,
        "load_avg_1min": [load0, _load()],
        "tasks": {},
    }
    for (env, target, cap), hit, r in zip(tasks, trainer.hits, res.tasks, strict=True):
        out["tasks"][env] = {
            "target": target,
            "cap": cap,
            "reached": hit is not None,
            **(hit or {}),
            "final_mean_return": r.mean_return,
            "final_env_steps": r.env_steps,
        }
    reached = " ".join(
        f"{env.split('/')[-1]}@{t['env_steps']:,}/{t['wall_s']:.0f}s"
        if t["reached"]
        else f"{env.split('/')[-1]}:not-reached({t['final_mean_return']})"
        for env, t in out["tasks"].items()
    )
    print(f"[{label}] {res.seconds:.0f}s {res.env_steps:,} steps; {reached}", flush=True)
    return out


def _fmt_steps(t: dict[str, Any]) -> str:
    return f"{t['env_steps']:,}" if t["reached"] else f"> {t['final_env_steps']:,} (not reached)"


def table(joint: dict[str, Any], solo: dict[str, dict[str, Any]]) -> str:
    """The docs table (markdown)."""
    rows = [
        "| task | target | joint: env steps | joint: wall s | alone: env steps | alone: wall s |",
        "|---|---|---|---|---|---|",
    ]
    for env, j in joint["tasks"].items():
        s = solo[env]["tasks"][env]
        jw = f"{j['wall_s']:.0f}" if j["reached"] else "—"
        sw = f"{s['wall_s']:.0f}" if s["reached"] else "—"
        rows.append(
            f"| {env} | {j['target']:g} | {_fmt_steps(j)} | {jw} | {_fmt_steps(s)} | {sw} |"
        )
    solo_sum = sum(s["wall_s"] for s in solo.values())
    rows.append(
        f"| **total** | | {joint['env_steps']:,} | {joint['wall_s']:.0f} | "
        f"{sum(s['env_steps'] for s in solo.values()):,} | {solo_sum:.0f} |"
    )
    return "\n".join(rows)


def compare_arms(
    tasks: list[tuple[str, float, int]], arms: list[str], seeds: list[int], max_seconds: float
) -> dict[str, Any]:
    """Per seed: every arm's joint run and the tasks alone (plain settings), side by side; per
    arm, the seeds' wall time to every target (the joint run's last first-hit; None where a task
    never reached it) against the sum of the solo runs' times to their targets."""
    per_seed = []
    for seed in seeds:
        SETTINGS["seed"] = seed
        joint = {arm: run(tasks, max_seconds, f"seed {seed} joint {arm}", arm) for arm in arms}
        solo = {t[0]: run([t], max_seconds, f"seed {seed} alone {t[0]}") for t in tasks}
        per_seed.append({"seed": seed, "joint": joint, "solo": solo})
    summary: dict[str, Any] = {}
    for arm in arms:
        every, ratio = [], []
        for entry in per_seed:
            hits = entry["joint"][arm]["tasks"].values()
            at = max(h["wall_s"] for h in hits) if all(h["reached"] for h in hits) else None
            solo_s = [s["tasks"][e] for e, s in entry["solo"].items()]
            alone = sum(h["wall_s"] for h in solo_s) if all(h["reached"] for h in solo_s) else None
            every.append(at)
            ratio.append(at / alone if at is not None and alone else None)
        summary[arm] = {"time_to_every_target_s": every, "over_solo_sum": ratio}
        shown = ", ".join(f"{x:.0f}" if x is not None else "—" for x in every)
        print(f"{arm:>7}: time to every target per seed [{shown}] s", flush=True)
    return {"per_seed": per_seed, "summary": summary}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-seconds", type=float, default=400.0, help="wall cap per run")
    ap.add_argument("--seed", type=int, default=SETTINGS["seed"])
    ap.add_argument("--only", nargs="*", help="env ids to keep (default: all of TASKS)")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument(
        "--arms",
        help=f"compare joint-run settings side by side, e.g. sum,pcgrad,moore ({', '.join(ARMS)})",
    )
    ap.add_argument("--seeds", help="with --arms: comma-separated seeds (default: --seed)")
    ap.add_argument(
        "--name",
        default="multitask_vs_single_arms",
        help="with --arms: result name (two calls with their own seeds can run side by side)",
    )
    args = ap.parse_args()
    SETTINGS["seed"] = args.seed
    tasks = [t for t in TASKS if not args.only or t[0] in args.only]
    if args.arms:
        arms = [a.strip() for a in args.arms.split(",") if a.strip()]
        unknown = [a for a in arms if a not in ARMS]
        if unknown:
            raise SystemExit(f"--arms: unknown {unknown}; known: {', '.join(ARMS)}")
        seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [args.seed]
        payload = {"machine": machine(), "settings": {**SETTINGS, "arms": arms, "seeds": seeds}}
        payload.update(compare_arms(tasks, arms, seeds, args.max_seconds))
        if not args.no_write:
            print(f"wrote {write_result(args.name, payload)}")
        return
    info = machine()
    joint = run(tasks, args.max_seconds, "joint")
    solo = {t[0]: run([t], args.max_seconds, f"alone {t[0]}") for t in tasks}
    solo_wall = sum(s["wall_s"] for s in solo.values())
    payload = {
        "machine": info,
        "settings": {
            **SETTINGS,
            "tasks": [list(t) for t in tasks],
            "max_seconds": args.max_seconds,
        },
        "joint": joint,
        "solo": solo,
        "totals": {
            "joint_wall_s": joint["wall_s"],
            "solo_wall_s_sum": solo_wall,
            "joint_env_steps": joint["env_steps"],
            "solo_env_steps_sum": sum(s["env_steps"] for s in solo.values()),
            "all_reached_joint": all(t["reached"] for t in joint["tasks"].values()),
            "all_reached_solo": all(s["tasks"][e]["reached"] for e, s in solo.items()),
        },
        "load_avg_1min_at_end": _load(),
    }
    print(table(joint, solo))
    print(f"joint {joint['wall_s']:.0f} s vs sum of solo {solo_wall:.0f} s")
    if not args.no_write:
        print(f"wrote {write_result('multitask_vs_single', payload)}")


if __name__ == "__main__":
    main()
