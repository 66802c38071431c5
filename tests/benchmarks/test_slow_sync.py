"""benchmarks/slow_sync.py runs end to end on a tiny config: replicas over a slowed link, and
the straggler comparison, with the figures it claims."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mtrl.testing.cpu_limit import unavailable as cpu_unavailable
from mtrl.testing.slow_links import unavailable

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        (unavailable() or cpu_unavailable()) is not None,
        reason=f"needs namespaces, tc, TUN and cgroups: {unavailable() or cpu_unavailable()}",
    ),
    pytest.mark.timeout(900),
]


def test_replicas_over_a_slow_link_and_a_straggler_are_measured(tmp_path: Path) -> None:
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(
        """
name: tiny
total_env_steps: 3000
tasks: [{env: gymnasium/CartPole-v1, num_envs: 8, target_score: 400}]
actors: {mode: serial}
learner: {model: {encoder_dim: 32, torso: [32]}, batch_size: 8}
"""
    )
    cmd = [sys.executable, str(ROOT / "benchmarks" / "slow_sync.py"), "--config", str(cfg),
           "--modes", "async", "--links", "5:100", "--replicas", "2", "--seeds", "0",
           "--sync-every", "4", "--straggler", "3", "--timeout-s", "600",
           "--results-dir", str(tmp_path)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=880, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    doc = json.loads((tmp_path / "slow_sync.json").read_text())
    (row,) = doc["rows"]
    assert row["mode"] == "async" and row["replicas"] == 2 and row["link"] == "5 ms / 100 Mbit/s"
    assert row["env_steps"] >= 3000 and row["updates"] > 0 and row["updates_per_s"] > 0
    assert row["reached"] is False  # 3,000 steps do not solve CartPole
    assert len(row["tx_mb"]) == 2 and all(mb > 0 for mb in row["tx_mb"])
    assert set(row["greedy"]) == {"gymnasium/CartPole-v1"}
    (strag,) = doc["straggler"]
    assert strag["mode"] == "async" and strag["fast_replica_updates_ratio"] > 0
