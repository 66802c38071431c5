"""benchmarks/ensemble_nodes.py runs end to end on a tiny ensemble over two Ray nodes: every
actor on its own node, the members' memory counted and a killed member's code seen and
restarted."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_a_tiny_ensemble_over_two_nodes_is_measured(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc for the C drift simulation")
    cmd = [sys.executable, str(ROOT / "benchmarks" / "ensemble_nodes.py"), "--nodes", "2",
           "--hosts-per-node", "1", "--members", "3", "--steps", "5", "--kills", "1",
           "--results-dir", str(tmp_path)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    out = json.loads((tmp_path / "ensemble_nodes.json").read_text())
    assert out["members"] == 6 and out["nodes_used"] == 2
    assert out["env_steps_per_s"] > 0 and out["bare_round_trip_s"] > 0
    assert out["processes_per_member"] >= 2  # a launcher and the code, per member
    assert out["memory_per_member_mb"] > 0
    (kill,) = out["kills"]
    assert kill["seen_s"] is not None and kill["seen_s"] < kill["up_s"]
