"""Ray actors (``actors.mode: ray``): overhead against process actors, and weak scaling of
latency-bound simulations over simulated nodes.

``overhead``: the same config in process mode and in ray mode (embedded Ray) — every actor a
Ray actor acting with its own policy copy (``ray``), and every actor local with central
inference (``ray_local``, ``actors.ray.local_actors`` = the actors) — runs alternating
(process, ray, ray_local, process, ...), env steps/s after warm-up: MinAtar breakout (2 actors
of 16 envs) and a 1 ms/step simulation (``chaos/wrap`` with ``step_delay_s: 0.001`` around
CartPole, 4 actors of 16 envs). Targets: ray >= 0.8 (MinAtar) and >= 0.9 (1 ms) of
process mode.

``scaling``: an env whose step waits 20 ms (as a simulation running on other cores would),
8 envs per actor, N actors spread over 4 simulated worker nodes (``ray.cluster_utils.Cluster``,
a head without CPUs); env steps/s against linear from the smallest N, the learner's updates/s,
and the actors' resident memory (what bounds N on one machine: an N whose projected memory
exceeds 80% of what is available is skipped, with the reason in the JSON).

Runs in a private network namespace when it can (mtrl.testing.netns): all traffic on loopback.

Usage: ``python benchmarks/ray_actors.py overhead [--seconds 40] [--repeat 2]``;
``python benchmarks/ray_actors.py scaling [--actors 8 16 32 64] [--seconds 40]``. Writes
``docs/results/ray_<part>.json``. Measures speed: run it alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

from mtrl.config import parse_config
from mtrl.testing.netns import in_private_network
from mtrl.train.trainer import Trainer

INSIDE = "MTRL_BENCH_NETNS"

WORKLOADS = {
    "minatar": ("  - {env: minatar/breakout, num_envs: 16}", 2),
    "sim_1ms": (
        "  - {env: chaos/wrap, name: sim-1ms, num_envs: 16,\n"
        "     env_kwargs: {env: gymnasium/CartPole-v1, step_delay_s: 0.001}}",
        4,
    ),
}


#: The overhead's arms: name -> (actors.mode, actors.ray.local_actors as a share of the actors).
ARMS = {"process": ("process", 0), "ray": ("ray", 0), "ray_local": ("ray", 1)}


def _config(
    tasks: str, mode: str, actors: int, run_dir: str, extra: str = "", local: int = 0
) -> Any:
    return parse_config(
        f"""
name: ray-bench-{mode}
total_env_steps: 1000000000
scheduler: {{num_actors: {actors}, rebalance_every_s: 1000}}
actors: {{mode: {mode}, ray: {{local_actors: {local}}}}}
checkpoint: {{enabled: false}}
tracking: {{run_dir: {run_dir}, log_every_s: 2, console: quiet, csv: false,
            wandb: {{mode: disabled}}}}
{extra}
tasks:
{tasks}
"""
    )


def _timed_run(cfg: Any, seconds: float, warmup: float) -> dict[str, Any]:
    """Train for ``seconds`` after the first env step; rates over the part after ``warmup``."""
    trainer = Trainer(cfg, console=False)
    marks: list[tuple[float, int, int]] = []  # (time, env steps, updates)

    class Clock(threading.Thread):
        def run(self) -> None:
            while not stop.is_set():
                marks.append((time.perf_counter(), trainer.env_steps, trainer.updates))
                time.sleep(0.5)

    stop = threading.Event()
    clock = Clock(daemon=True)
    clock.start()

    def stopper() -> None:
        while trainer.env_steps == 0 and not stop.is_set():
            time.sleep(0.1)
        time.sleep(seconds)
        trainer.request_stop()

    threading.Thread(target=stopper, daemon=True).start()
    try:
        trainer.run()
    finally:
        stop.set()
        lag = _mean_metric(trainer, "charts/policy_lag")
        trainer.close()
    first = next(i for i, m in enumerate(marks) if m[1] > 0)
    t0 = marks[first][0] + warmup
    window = [m for m in marks if m[0] >= t0]
    (ta, sa, ua), (tb, sb, ub) = window[0], window[-1]
    return {
        "env_steps_per_s": (sb - sa) / (tb - ta),
        "updates_per_s": (ub - ua) / (tb - ta),
        "window_s": tb - ta,
        "policy_lag_mean": lag,
    }


def _mean_metric(trainer: Trainer, key: str) -> float | None:
    path = trainer.run_dir / "metrics.jsonl" if trainer.run_dir else None
    if path is None or not path.exists():
        return None
    vals = [json.loads(x).get(key) for x in path.open()]
    vals = [v for v in vals if v is not None]
    return sum(vals) / len(vals) if vals else None


def overhead(seconds: float, repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (tasks, actors) in WORKLOADS.items():
            runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
            for r in range(repeat):
                for arm, (mode, share) in ARMS.items():
                    cfg = _config(tasks, mode, actors, tmp, local=share * actors)
                    res = _timed_run(cfg, seconds, seconds / 4)
                    runs[arm].append(res)
                    print(
                        f"{name:8s} {arm:9s} run {r}: {res['env_steps_per_s']:9,.0f} env "
                        f"steps/s, {res['updates_per_s']:.1f} updates/s, lag "
                        f"{res['policy_lag_mean'] or float('nan'):.2f}",
                        flush=True,
                    )
            med = {m: sorted(x["env_steps_per_s"] for x in v)[len(v) // 2] for m, v in runs.items()}
            out[name] = {"actors": actors, "runs": runs, "median_env_steps_per_s": med}
            for arm in ("ray", "ray_local"):
                ratios = [
                    b["env_steps_per_s"] / a["env_steps_per_s"]
                    for a, b in zip(runs["process"], runs[arm], strict=True)
                ]
                out[name][f"{arm}_over_process_per_pair"] = ratios
                out[name][f"{arm}_over_process_median"] = sorted(ratios)[len(ratios) // 2]
                text = ", ".join(f"{x:.2f}" for x in ratios)
                print(f"{name}: {arm} / process = {text}", flush=True)
    return out


def _actor_rss_mb() -> tuple[int, float]:
    """(count, total resident MiB) of this machine's Ray actor processes of mtrl."""
    n, total = 0, 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"RemoteActor" not in cmd:
                continue
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        rss = next((ln for ln in status.splitlines() if ln.startswith("VmRSS:")), None)
        if rss:
            n += 1
            total += int(rss.split()[1]) / 1024
    return n, total


def _available_mib() -> float:
    """MemAvailable of this machine, MiB."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def scaling(actor_counts: list[int], seconds: float, nodes: int = 4) -> dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster

    tasks = (
        "  - {env: chaos/wrap, name: sim-20ms, num_envs: 8,\n"
        "     env_kwargs: {env: gymnasium/CartPole-v1, step_delay_s: 0.02}}"
    )
    out: dict[str, Any] = {"nodes": nodes, "step_delay_s": 0.02, "envs_per_actor": 8, "runs": []}
    out["skipped"] = []
    per_actor_mib = 0.0
    for n in actor_counts:
        free_mib = _available_mib()
        if per_actor_mib and n * per_actor_mib > 0.8 * free_mib:
            why = (
                f"{n} actors need ~{n * per_actor_mib:,.0f} MiB resident ({per_actor_mib:.0f} "
                f"MiB per actor process, measured) > 80% of the {free_mib:,.0f} MiB available"
            )
            print(f"{n:4d} actors: skipped: {why}", flush=True)
            out["skipped"].append({"actors": n, "why": why})
            continue
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        for _ in range(nodes):
            cluster.add_node(num_cpus=-(-n // nodes))
        ray.init(address=cluster.address)
        cluster.wait_for_nodes()
        rss: list[tuple[int, float]] = []

        def sample_rss(stop: threading.Event, rss: list[tuple[int, float]] = rss) -> None:
            while not stop.is_set():
                rss.append(_actor_rss_mb())
                time.sleep(2)

        stop = threading.Event()
        threading.Thread(target=sample_rss, args=(stop,), daemon=True).start()
        try:
            with tempfile.TemporaryDirectory() as tmp:
                res = _timed_run(_config(tasks, "ray", n, tmp), seconds, seconds / 4)
        finally:
            stop.set()
            ray.shutdown()
            cluster.shutdown()
        peak = max(rss, key=lambda x: x[1]) if rss else (0, 0.0)
        res.update(actors=n, actor_processes=peak[0], actors_rss_mib=peak[1])
        per_actor_mib = max(per_actor_mib, peak[1] / max(peak[0], 1))
        out["runs"].append(res)
        print(
            f"{n:4d} actors: {res['env_steps_per_s']:9,.0f} env steps/s, "
            f"{res['updates_per_s']:.1f} updates/s, {peak[0]} actor processes "
            f"{peak[1]:,.0f} MiB",
            flush=True,
        )
    base = out["runs"][0]
    ideal_per_actor = out["envs_per_actor"] / out["step_delay_s"]
    for r in out["runs"]:
        r["vs_linear"] = r["env_steps_per_s"] / (
            base["env_steps_per_s"] * r["actors"] / base["actors"]
        )
        r["vs_ideal"] = r["env_steps_per_s"] / (ideal_per_actor * r["actors"])
        print(
            f"{r['actors']:4d} actors: {r['vs_linear']:.2f} of linear from {base['actors']}, "
            f"{r['vs_ideal']:.2f} of {ideal_per_actor:.0f} steps/s per actor",
            flush=True,
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("part", choices=["overhead", "scaling"])
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--actors", type=int, nargs="+", default=[8, 16, 32, 64])
    args = p.parse_args()
    if not os.environ.get(INSIDE):
        env = dict(os.environ, **{INSIDE: "1", "RAY_USAGE_STATS_ENABLED": "0"})
        cmd = in_private_network([sys.executable, *sys.argv])
        sys.exit(subprocess.run(cmd, env=env).returncode)
    info = {"machine": machine(), "args": vars(args)}
    if args.part == "overhead":
        result = overhead(args.seconds, args.repeat)
    else:
        result = scaling(args.actors, args.seconds)
    path = write_result(f"ray_{args.part}", {**info, **result})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
