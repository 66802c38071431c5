"""Learner replicas over slow links: wall time to target, bytes sent and updates/s for each
``learner.parallel.sync`` mode, side by side.

Each run is N ``mtrl train`` replicas (torchrun, one process per host), each in its own
network namespace of :class:`mtrl.testing.slow_links.SlowNetwork`, each with its own actors,
on ``--config`` (default the quickstart) with ``stop_at_target: true``. For every link of
``--links`` (``DELAY_MS:RATE_MBIT``), replica count of ``--replicas``, mode of ``--modes``
and seed of ``--seeds``, interleaved (seed-major), it records:

- ``wall_s``: from launch to the last replica's exit, and ``reached``: whether every task
  reached its target (the run then stopped there; else it ran its whole budget);
- ``tx_mb``: megabytes each host sent over its link (the device's counter, so everything:
  gradients or states, rendezvous, joint decisions);
- ``updates_per_s`` of rank 0 over its training time, and the final greedy returns.

``--straggler F``: also runs, at the first link and N = 2, ``allreduce`` and ``async`` twice:
each replica held to its own half of the machine's cores (:class:`mtrl.testing.cpu_limit.
CpuLimit`, so the fast replica cannot use what the slowed one leaves), then the same with the
last replica held to 1/F of its half; it reports the fast replica's updates/s slowed over
unslowed. ``--straggler-steps`` shortens those runs (updates/s is a rate: the budget only
sets how long it is averaged over).

Usage: ``python benchmarks/slow_sync.py [--config configs/quickstart.yaml] [--modes
allreduce,local_sgd,diloco,diloco:0.5:0.5,async] [--links 0.1:10000,20:100] [--replicas 2,4]
[--seeds 0,1,2] [--sync-every 50] [--set PATH=VALUE ...] [--straggler 3] [--straggler-steps N]
[--results-dir DIR]`` (``--seeds ''``: the straggler runs only). ``diloco:LR:MOMENTUM`` in
``--modes`` is DiLoCo with that outer learning rate and Nesterov momentum, beside the other
modes; ``--set`` (as in ``benchmarks/learning.py``, e.g. ``--set total_env_steps=300000``)
applies to every run and is kept in the JSON.
Needs root (namespaces, tc, TUN, cgroups). Writes ``slow_sync.json``.
Measures speed: run it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result
from learning_stats import apply_overrides

from mtrl.testing.cpu_limit import CpuLimit
from mtrl.testing.slow_links import Link, SlowNetwork

ROOT = Path(__file__).resolve().parents[1]


def parse_link(text: str) -> Link:
    delay, _, rate = text.partition(":")
    return Link(delay_ms=float(delay), rate_mbit=float(rate) if rate else None)


def parse_arm(text: str) -> tuple[str, dict[str, float]]:
    """An entry of ``--modes``: a sync mode, or ``diloco:LR:MOMENTUM`` for DiLoCo with that outer
    learning rate and Nesterov momentum. Returns the mode and its ``learner.parallel`` extras."""
    mode, *outer = text.split(":")
    if not outer:
        return mode, {}
    usage = f"--modes {text!r}: only diloco takes settings, as diloco:LR:MOMENTUM (numbers)"
    if mode != "diloco" or len(outer) != 2:
        raise ValueError(usage)
    try:
        lr, momentum = (float(x) for x in outer)
    except ValueError:
        raise ValueError(usage) from None
    return mode, {"outer_learning_rate": lr, "outer_momentum": momentum}


def run_config(
    base: dict[str, Any], mode: str, extras: dict[str, float], every: int, seed: int, out: Path
) -> Path:
    """The config of one run: ``base`` with the sync mode and its ``learner.parallel`` extras
    (:func:`parse_arm`), the seed, a stop at target and its own run directory."""
    cfg = json.loads(json.dumps(base))
    cfg["name"] = f"{mode}"
    cfg["seed"] = seed
    cfg["stop_at_target"] = True
    learner = cfg.setdefault("learner", {})
    learner["parallel"] = {
        **learner.get("parallel", {}), "sync": mode, "sync_every": every, **extras
    }  # fmt: skip
    tracking = cfg.setdefault("tracking", {})
    tracking["run_dir"] = str(out / "runs")
    tracking["console"] = "plain"
    tracking["wandb"] = {"mode": "disabled"}
    cfg.setdefault("checkpoint", {})["enabled"] = False
    path = out / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def train(
    net: SlowNetwork, cfg: Path, cores: list[float] | None = None, timeout: float = 3600
) -> dict[str, Any]:
    """One run over ``net``; with ``cores``, host ``i``'s replica (and its actors) is held to
    ``cores[i]`` CPU cores. Returns its figures."""
    before = [net.tx_bytes(i) for i in range(net.hosts)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    cmds = net.torchrun(["-m", "mtrl.cli", "train", str(cfg)])
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        for i, c in enumerate(cores or []):
            cmds[i] = stack.enter_context(CpuLimit(c)).wrap(cmds[i])
        logs = [cfg.parent / f"host{i}.log" for i in range(net.hosts)]
        procs = [
            subprocess.Popen(c, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=ROOT)
            for c, log in zip(cmds, logs, strict=True)
        ]
        try:
            codes = [p.wait(timeout=timeout) for p in procs]
        finally:
            for p in procs:
                p.kill()
    wall = time.perf_counter() - started
    if any(codes):
        log = logs[codes.index(max(codes))].read_text()
        raise RuntimeError(f"replicas exited {codes}:\n{log[-3000:]}")
    (run_dir,) = (cfg.parent / "runs").iterdir()
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").open()]
    last = records[-1]
    tasks = sorted({k.split("/", 1)[1].rsplit("/", 1)[0] for k in last if k.startswith("eval/")})
    return {
        "wall_s": wall,
        "env_steps": last["charts/env_steps"],
        "updates": last["charts/updates"],
        "updates_per_s": last["charts/updates"] / max(last["charts/elapsed_s"], 1e-9),
        "reached": reached(yaml.safe_load(cfg.read_text()), last),
        "tx_mb": [(net.tx_bytes(i) - b) / 1e6 for i, b in enumerate(before)],
        "greedy": {t: last.get(f"eval/{t}/greedy_return") for t in tasks},
        "returns": {t: last.get(f"task/{t}/return") for t in tasks},  # recent, training
        "sync": {k: v for k, v in last.items() if k.startswith("sync/")},
    }


def reached(cfg: dict[str, Any], last: dict[str, Any]) -> bool:
    """Whether every task with a target ended at it (its recent mean return, as the run's own
    stop at target reads it)."""
    targets = [(t["env"], t["target_score"]) for t in cfg["tasks"] if "target_score" in t]
    return bool(targets) and all(
        last.get(f"task/{env}/return", float("-inf")) >= target for env, target in targets
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "quickstart.yaml"))
    parser.add_argument("--modes", default="allreduce,local_sgd,diloco,async")
    parser.add_argument("--links", default="0.1:10000,20:100")
    parser.add_argument("--replicas", default="2,4")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--sync-every", type=int, default=50)
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE",
        help="a config override for every run (repeatable)",
    )  # fmt: skip
    parser.add_argument("--straggler", type=float, default=0.0, help="slowdown; 0: none")
    parser.add_argument(
        "--straggler-steps", type=int, default=0, help="env steps of the straggler runs"
    )
    parser.add_argument("--timeout-s", type=float, default=3600)
    parser.add_argument("--results-dir", default=None)
    args = parser.parse_args(argv)
    base = apply_overrides(yaml.safe_load(Path(args.config).read_text()), args.overrides)
    modes = args.modes.split(",")
    try:  # a bad entry is refused before any run
        arms = {arm: parse_arm(arm) for arm in modes}
    except ValueError as e:
        parser.error(str(e))
    links = [parse_link(x) for x in args.links.split(",")]
    counts = [int(x) for x in args.replicas.split(",")]
    seeds = [int(x) for x in args.seeds.split(",") if x]
    rows: list[dict[str, Any]] = []
    doc: dict[str, Any] = {"machine": machine(), "args": vars(args), "rows": rows}
    for seed in seeds:
        for link in links:
            for n in counts:
                with SlowNetwork(n, link) as net:
                    for arm, (mode, extras) in arms.items():
                        with tempfile.TemporaryDirectory() as tmp:
                            cfg = run_config(base, mode, extras, args.sync_every, seed, Path(tmp))
                            row = train(net, cfg, timeout=args.timeout_s)
                        row.update(mode=mode, arm=arm, link=str(link), replicas=n, seed=seed)
                        row.update(extras)
                        rows.append(row)
                        print(
                            f"{link} N={n} {arm:14s} seed {seed}: {row['wall_s']:.0f} s, "
                            f"reached {row['reached']}, {sum(row['tx_mb']) / n:.1f} MB/host, "
                            f"{row['updates_per_s']:.1f} updates/s",
                            flush=True,
                        )
                        write_result("slow_sync", doc, args.results_dir)
    if args.straggler > 0:
        doc["straggler"] = straggler_rows(base, args, links[0], modes)
    path = write_result("slow_sync", doc, args.results_dir)
    print(f"wrote {path}")
    return 0


def straggler_rows(
    base: dict[str, Any],
    args: argparse.Namespace,
    link: Link,
    modes: list[str],
) -> list[dict[str, Any]]:
    """Rank 0's updates/s with the last replica held to 1/F of its half of the cores and
    without, every replica held to its half either way (seed 0, two replicas, ``link``)."""
    out = []
    half = (os.cpu_count() or 1) / 2  # each of the two replicas' own share of the cores
    if args.straggler_steps:
        base = {**base, "total_env_steps": args.straggler_steps}
    for mode in [m for m in ("allreduce", "async") if m in modes]:
        figures = {}
        for slowed in (False, True):
            with SlowNetwork(2, link) as net, tempfile.TemporaryDirectory() as tmp:
                cfg = run_config(base, mode, {}, args.sync_every, 0, Path(tmp))
                cores = [half, half / args.straggler if slowed else half]
                figures[slowed] = train(net, cfg, cores=cores, timeout=args.timeout_s)
        ratio = figures[True]["updates_per_s"] / figures[False]["updates_per_s"]
        out.append({"mode": mode, "link": str(link), "slowdown": args.straggler,
                    "unslowed": figures[False], "slowed": figures[True],
                    "fast_replica_updates_ratio": ratio})  # fmt: skip
        print(f"straggler {args.straggler:g}x, {mode}: the fast replica at {ratio:.2f} of its "
              "unslowed updates/s", flush=True)  # fmt: skip
    return out


if __name__ == "__main__":
    sys.exit(main())
