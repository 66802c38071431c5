"""benchmarks/sync_projection.py: the cost model's limits, and its run from measured rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from sync_projection import (  # noqa: E402
    bytes_per_update,
    calibrate,
    check,
    core_sharing,
    update_seconds,
)

S, T = 4e6, 0.05  # a 4 MB state, 50 ms of compute per update


def test_free_links_cost_nothing_and_one_period_is_allreduce() -> None:
    for mode in ("allreduce", "local_sgd", "diloco", "async"):
        assert update_seconds(mode, 64, T, S, 0.0, float("inf")) == pytest.approx(T)
    slow = (8, T, S, 0.01, 12.5e6)
    reduced = update_seconds("allreduce", *slow)
    local = update_seconds("local_sgd", *slow, every=1)
    assert local == pytest.approx(reduced - 4 * 2 * 7 * 0.01)  # 2 collectives against 6
    assert update_seconds("local_sgd", *slow, every=50) < reduced / 5
    assert bytes_per_update("allreduce", 8, S) == pytest.approx(
        50 * bytes_per_update("diloco", 8, S)
    )


def test_a_straggler_slows_every_synchronous_replica_but_not_async() -> None:
    args = (4, T, S, 1e-4, 1.25e9)
    for mode in ("allreduce", "local_sgd"):
        assert update_seconds(mode, *args, straggler=3.0) > 2.9 * T
    assert update_seconds("async", *args, straggler=3.0) == T
    with pytest.raises(ValueError, match="unknown sync mode"):
        update_seconds("gossip", *args)


def test_the_latency_term_of_a_ring_grows_with_the_replicas() -> None:
    wan = (T, S, 0.01, 1.25e9)
    assert update_seconds("allreduce", 1024, *wan) > 120.0  # 6 x 2 x 1023 x 10 ms per update
    assert update_seconds("diloco", 1024, *wan, every=500) < 0.2


def test_calibration_and_projection_run_from_measured_rows(tmp_path: Path) -> None:
    rows = [
        {"mode": "async", "link": "0.1 ms / 10000 Mbit/s", "replicas": 2, "seed": 0,
         "updates_per_s": 20.0, "updates": 100, "tx_mb": [1.0, 1.0],
         "sync": {"sync/sent": 25, "sync/bytes_sent": 25 * 40_000}},
        {"mode": "allreduce", "link": "20 ms / 100 Mbit/s", "replicas": 2, "seed": 0,
         "updates_per_s": 8.0, "updates": 100, "tx_mb": [4.0, 4.0], "sync": {}},
    ]  # fmt: skip
    cal = calibrate(rows)
    assert cal == {"compute_s": pytest.approx(0.05), "state_bytes": pytest.approx(40_000)}
    measured = tmp_path / "slow_sync.json"
    measured.write_text(json.dumps({"rows": rows}))
    cmd = [sys.executable, str(ROOT / "benchmarks" / "sync_projection.py"), "--measured",
           str(measured), "--replicas", "64,1024", "--results-dir", str(tmp_path)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads((tmp_path / "sync_projection.json").read_text())
    assert len(doc["checked"]) == 2 and len(doc["projection"]) == 2 * 4 * 2
    assert (tmp_path / "sync_projection.png").stat().st_size > 10_000


def test_replicas_sharing_the_measuring_machines_cores_are_modelled_slower() -> None:
    """Four replicas on two cores compute at half speed each: the calibration undoes that
    (a cluster gives each replica its own cores) and the check puts it back per run."""
    assert core_sharing(2, 2) == 1.0 and core_sharing(4, 2) == 2.0 and core_sharing(4, None) == 1.0
    row = {"mode": "local_sgd", "link": "0.1 ms / 10000 Mbit/s", "replicas": 4, "seed": 0,
           "updates_per_s": 5.0, "updates": 50, "tx_mb": [1.0] * 4,
           "sync": {"sync/count": 1, "sync/bytes_sent": 1.5 * 40_000}}  # fmt: skip
    cal = calibrate([row], cpus=2)
    assert cal["compute_s"] == pytest.approx(0.1) and cal["state_bytes"] == pytest.approx(40_000)
    (checked,) = check([row], cal, every=50, cpus=2)
    assert checked["model_updates_per_s"] == pytest.approx(5.0, rel=0.01)  # the sync is small
