"""A cost model of learner replicas' synchronisation, checked against benchmarks/slow_sync.py's
measured runs and projected to 64–1,024 replicas on a real cluster's links.

Per learner update of one replica (``t``: its compute time; ``S``: the bytes of the state or
gradient it shares; ``N`` replicas; a link of one-way latency ``L`` and bandwidth ``W`` per
host; ``H``: updates between syncs; ``F``: how much slower the slowest replica computes):

- ``allreduce``: a ring all-reduce of the gradients every update and 5 small ones (sample
  count, PopArt sums, clip norm, metrics, the joint stop decision: latency only):
  ``F·t + 6·2(N−1)·L + 2(N−1)/N · S/W``; it sends ``2(N−1)/N · S`` per update (every replica
  waits for the slowest: ``F·t``);
- ``local_sgd`` / ``diloco``: the same all-reduce once per ``H`` updates, plus the joint
  decision's small all-reduce (latency only): ``F·t + (2(N−1)·L·2 + 2(N−1)/N · S/W) / H``;
  ``2(N−1)/N · S / H`` bytes per update;
- ``async``: a replica never waits: ``t`` (the fast ones; the send is queued and goes in the
  background), as long as its link carries ``S`` every ``H`` updates (``S/W ≤ H·t``; beyond,
  sends are dropped and the mixing thins out, not the updates); ``S / H`` bytes per update.

Ring all-reduce is what gloo and NCCL use for large buffers; its latency term grows with N,
which is what breaks first at 1,024 replicas over a wide-area link.

Usage: ``python benchmarks/sync_projection.py [--measured docs/results/slow_sync.json]
[--replicas 64,128,256,512,1024] [--every 50] [--results-dir DIR]``. Writes
``sync_projection.json`` and ``sync_projection.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, write_result

MODES = ("allreduce", "local_sgd", "diloco", "async")
#: Small all-reduces of an all-reduce update besides the gradients' (latency only): the sample
#: count, PopArt's moment sums, the clip norm, the metric sums and the joint stop decision.
SMALL_COLLECTIVES = 5


@dataclass(frozen=True)
class ClusterLink:
    """One host's link: one-way latency (s) and bandwidth (bytes/s)."""

    name: str
    latency_s: float
    bandwidth: float


#: The links projected to. Figures are typical published ones, not measured here.
CLUSTER_LINKS = (
    ClusterLink("HPC fabric (InfiniBand HDR 100 Gbit/s, ~2 µs)", 2e-6, 100e9 / 8),
    ClusterLink("between sites (10 Gbit/s, 10 ms; e.g. Grid'5000 over RENATER)", 10e-3, 10e9 / 8),
)


def ring_bytes(state_bytes: float, n: int) -> float:
    """Bytes one replica sends in a ring all-reduce of ``state_bytes``."""
    return 0.0 if n <= 1 else 2 * (n - 1) / n * state_bytes


def ring_seconds(state_bytes: float, n: int, latency_s: float, bandwidth: float) -> float:
    """A ring all-reduce's time: 2(N−1) steps of one latency, and the bytes at the bandwidth."""
    return 0.0 if n <= 1 else 2 * (n - 1) * latency_s + ring_bytes(state_bytes, n) / bandwidth


def update_seconds(
    mode: str,
    n: int,
    compute_s: float,
    state_bytes: float,
    latency_s: float,
    bandwidth: float,
    every: int = 50,
    straggler: float = 1.0,
) -> float:
    """Seconds per update of a fast replica (module docstring)."""
    if mode == "allreduce":
        small = SMALL_COLLECTIVES * ring_seconds(0, n, latency_s, bandwidth)
        return straggler * compute_s + ring_seconds(state_bytes, n, latency_s, bandwidth) + small
    if mode in ("local_sgd", "diloco"):
        sync = ring_seconds(state_bytes, n, latency_s, bandwidth) + ring_seconds(
            0, n, latency_s, bandwidth
        )
        return straggler * compute_s + sync / every
    if mode == "async":
        return compute_s
    raise ValueError(f"unknown sync mode {mode!r}; known: {', '.join(MODES)}")


def bytes_per_update(mode: str, n: int, state_bytes: float, every: int = 50) -> float:
    """Bytes one replica sends per update (the state or gradient payload only)."""
    if mode == "allreduce":
        return ring_bytes(state_bytes, n)
    if mode in ("local_sgd", "diloco"):
        return ring_bytes(state_bytes, n) / every
    if mode == "async":
        return state_bytes / every
    raise ValueError(f"unknown sync mode {mode!r}; known: {', '.join(MODES)}")


def async_keeps_up(compute_s: float, state_bytes: float, bandwidth: float, every: int) -> bool:
    """Whether an async replica's link carries its sends (else some are dropped)."""
    return state_bytes / bandwidth <= every * compute_s


def core_sharing(replicas: int, cpus: int | None) -> float:
    """How many times slower a replica computes when ``replicas`` share the measuring
    machine's ``cpus`` cores than with cores of its own (1 when ``cpus`` is unknown): the
    measured runs put every replica on one machine, a cluster gives each its own."""
    return max(1.0, replicas / cpus) if cpus else 1.0


def calibrate(rows: list[dict[str, Any]], cpus: int | None = None) -> dict[str, float]:
    """Compute time per update and state bytes from measured runs: the compute time from the
    mode that communicates least on the fastest link (its updates/s), as a replica with cores
    of its own would take it (:func:`core_sharing` of the ``cpus`` that ran them), the state
    size from an async run's message (bytes sent / messages) or a periodic one's ring bytes
    per sync."""
    fast = min(rows, key=lambda r: float(r["link"].split(" ms")[0]))["link"]
    local = [r for r in rows if r["link"] == fast and r["mode"] in ("async", "local_sgd", "diloco")]
    best = max(local or rows, key=lambda r: r["updates_per_s"])
    compute_s = 1.0 / best["updates_per_s"] / core_sharing(best["replicas"], cpus)
    state = None
    for r in rows:
        s = r.get("sync", {})
        if r["mode"] == "async" and s.get("sync/sent"):
            state = s["sync/bytes_sent"] / s["sync/sent"]
        elif s.get("sync/count") and state is None:
            n = r["replicas"]
            state = s["sync/bytes_sent"] / s["sync/count"] / (2 * (n - 1) / n)
    if state is None:
        raise ValueError("no measured run says how large a replica's state is")
    return {"compute_s": compute_s, "state_bytes": state}


def check(
    rows: list[dict[str, Any]], cal: dict[str, float], every: int, cpus: int | None = None
) -> list[dict[str, Any]]:
    """The model's updates/s and bytes/update beside each measured run's (its replicas sharing
    the ``cpus`` cores that ran them: :func:`core_sharing`)."""
    out = []
    for r in rows:
        delay_ms, _, rest = r["link"].partition(" ms / ")
        mbit = float(rest.split()[0]) if rest and rest[0].isdigit() else float("inf")
        compute_s = cal["compute_s"] * core_sharing(r["replicas"], cpus)
        model_s = update_seconds(
            r["mode"], r["replicas"], compute_s, cal["state_bytes"],
            float(delay_ms) / 1000, mbit * 1e6 / 8, every,
        )  # fmt: skip
        measured_bytes = 1e6 * sum(r["tx_mb"]) / len(r["tx_mb"]) / max(r["updates"], 1)
        model_bytes = bytes_per_update(r["mode"], r["replicas"], cal["state_bytes"], every)
        out.append({
            "mode": r["mode"], "link": r["link"], "replicas": r["replicas"], "seed": r["seed"],
            "updates_per_s": r["updates_per_s"], "model_updates_per_s": 1 / model_s,
            "bytes_per_update": measured_bytes,
            "model_bytes_per_update": model_bytes,
        })  # fmt: skip
    return out


def project(cal: dict[str, float], replicas: list[int], every: int) -> list[dict[str, Any]]:
    out = []
    compute_s, state = cal["compute_s"], cal["state_bytes"]
    for link in CLUSTER_LINKS:
        keeps_up = async_keeps_up(compute_s, state, link.bandwidth, every)
        for mode in MODES:
            for n in replicas:
                s = update_seconds(mode, n, cal["compute_s"], cal["state_bytes"],
                                   link.latency_s, link.bandwidth, every)  # fmt: skip
                out.append({
                    "link": link.name, "mode": mode, "replicas": n,
                    "updates_per_s": 1 / s,
                    "comm_share": 1 - cal["compute_s"] / s,
                    "bytes_per_update": bytes_per_update(mode, n, cal["state_bytes"], every),
                    "async_keeps_up": keeps_up,
                })  # fmt: skip
    return out


def plot(points: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CLUSTER_LINKS), figsize=(6 * len(CLUSTER_LINKS), 4))
    for ax, link in zip(axes, CLUSTER_LINKS, strict=True):
        for mode in MODES:
            pts = [p for p in points if p["link"] == link.name and p["mode"] == mode]
            ax.plot(
                [p["replicas"] for p in pts], [p["updates_per_s"] for p in pts], "o-", label=mode
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("replicas")
        ax.set_ylabel("updates/s per replica (model)")
        ax.set_title(link.name, fontsize=9)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measured", type=Path, default=RESULTS / "slow_sync.json")
    parser.add_argument("--replicas", default="64,128,256,512,1024")
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--results-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    measured = json.loads(args.measured.read_text())
    rows, cpus = measured["rows"], measured.get("machine", {}).get("cpu_count")
    cal = calibrate(rows, cpus)
    replicas = [int(x) for x in args.replicas.split(",")]
    doc = {
        "calibration": cal,
        "links": [asdict(link) for link in CLUSTER_LINKS],
        "checked": check(rows, cal, args.every, cpus),
        "projection": project(cal, replicas, args.every),
    }
    path = write_result("sync_projection", doc, args.results_dir)
    plot(doc["projection"], path.with_suffix(".png"))
    for c in doc["checked"]:
        kb, model_kb = c["bytes_per_update"] / 1e3, c["model_bytes_per_update"] / 1e3
        print(f"{c['link']:>22} N={c['replicas']} {c['mode']:9s}: {c['updates_per_s']:.2f} "
              f"updates/s (model {c['model_updates_per_s']:.2f}), {kb:.1f} kB/update "
              f"(model {model_kb:.1f})")  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
