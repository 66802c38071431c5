"""The share gate on the case that used to stall it: five tasks, one actor each, one task at
weight 2 (``scheduler: {policy: balanced, num_actors: 5}``).

With one actor per task ``balanced`` has nothing to move; the old gate then made every task
wait for the slowest one (steps/s fell ~3.5x, the CPU idled). The gate is now work-conserving
and the weights are met by loss weighting (:mod:`mtrl.train.loss_weights`). Three runs of
the same config, one after the other, process actors: the gate on (the default), the gate off
(``share_gate: false``) and ``fixed``. Reported after warm-up: env steps/s, each task's share
of the learner's data and of the weighted learning signal (``scheduler/<task>/effective_share``,
averaged over the logged records) against its weight share, and how busy the CPU was (from
``/proc/stat``).
Targets (issue: a work-conserving share gate): gate-on steps/s >= 0.9 x gate-off, every task's
effective share within +-10 % of its weight share.

Usage: ``python benchmarks/share_gate.py [--seconds 90]``; writes
``docs/results/share_gate.json``. Measures speed: run it alone.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result
from scheduler_live import _run, _shares

TASKS = """
  - {env: gymnasium/CartPole-v1, num_envs: 16}
  - {env: minatar/breakout, num_envs: 16, weight: 2}
  - {env: minatar/freeway, num_envs: 16}
  - {env: scisim/heat1d, name: heat-n512, num_envs: 8, env_kwargs: {n: 512}}
  - {env: scisim/epidemic, name: epidemic, num_envs: 8,
     env_kwargs: {population: 20000, method: gillespie}}
"""
NAMES = ["gymnasium/CartPole-v1", "minatar/breakout", "minatar/freeway", "heat-n512", "epidemic"]
WEIGHTS = [1.0, 2.0, 1.0, 1.0, 1.0]
RUNS = [("gate", "balanced", True), ("no_gate", "balanced", False), ("fixed", "fixed", True)]


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs since boot, from ``/proc/stat``."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


class CpuSampler:
    """``/proc/stat`` once a second on a thread, to tell how busy the CPUs were in a window."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.samples: list[tuple[float, float, float]] = []  # (seconds since t0, busy, total)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter() - self.t0, *cpu_times()))
            self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def busy(self, start_s: float, end_s: float) -> float | None:
        """Busy fraction of all CPUs between ``start_s`` and ``end_s`` (seconds since t0)."""
        inside = [x for x in self.samples if start_s <= x[0] <= end_s]
        if len(inside) < 2:
            return None
        (_, b0, t0), (_, b1, t1) = inside[0], inside[-1]
        return (b1 - b0) / max(t1 - t0, 1.0)


def _mean(records: list[dict[str, Any]], key: str) -> float | None:
    """Mean of a logged metric over ``records`` (None where it was never logged)."""
    values = [r[key] for r in records if r.get(key) is not None]
    return sum(values) / len(values) if values else None


def one(label: str, policy: str, gate: bool, seconds: float, tmp: str) -> dict[str, Any]:
    sampler = CpuSampler()
    records = _run(TASKS, policy, len(NAMES), seconds, tmp, gate=gate)
    sampler.stop()
    # Warm-up: the actors' start (imports, first resets) and a third of the stepping time.
    first = next(r["charts/elapsed_s"] for r in records if r["charts/env_steps"] > 0)
    end = records[-1]["charts/elapsed_s"]
    warm = first + (end - first) / 3
    busy = sampler.busy(warm, end)
    res = _shares(records, NAMES, after_s=warm)
    window = [r for r in records if r["charts/elapsed_s"] >= warm]
    last = records[-1]
    weight_share = {n: w / sum(WEIGHTS) for n, w in zip(NAMES, WEIGHTS, strict=True)}
    effective = {n: _mean(window, f"scheduler/{n}/effective_share") for n in NAMES}
    res.update(
        label=label,
        first_steps_s=first,
        window_s=end - warm,
        cpu_busy=busy,
        weight_share=weight_share,
        effective_share=effective,
        loss_weight={n: _mean(window, f"scheduler/{n}/loss_weight") for n in NAMES},
        overdue_unrolls=last.get("scheduler/overdue_unrolls"),
        filled_unrolls=last.get("scheduler/filled_unrolls"),
        max_rel_error_effective=max(
            abs((effective[n] or 0.0) / weight_share[n] - 1) for n in NAMES
        ),
    )
    print(
        f"{label:8s} {res['env_steps_per_s']:8,.0f} env steps/s  CPU busy "
        f"{busy if busy is None else f'{busy:.0%}'}  max |effective/weight - 1| = "
        f"{res['max_rel_error_effective']:.2f}"
    )
    for n in NAMES:
        print(
            f"{'':8s} {n:24s} weight {weight_share[n]:.1%}  data {res['share'][n]:.1%}  "
            f"effective {effective[n] or 0:.1%}  loss weight {res['loss_weight'][n] or 1:.2f}"
        )
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=90.0)
    args = ap.parse_args()
    out: dict[str, Any] = {"machine": machine(), "seconds": args.seconds, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for label, policy, gate in RUNS:
            out["runs"][label] = one(label, policy, gate, args.seconds, tmp)
    runs = out["runs"]
    out["gate_over_no_gate_sps"] = (
        runs["gate"]["env_steps_per_s"] / runs["no_gate"]["env_steps_per_s"]
    )
    print(f"gate on / gate off env steps/s: {out['gate_over_no_gate_sps']:.2f} (target >= 0.9)")
    print(f"written to {write_result('share_gate', out)}")


if __name__ == "__main__":
    main()
