"""benchmarks/ensemble_scale.py runs end to end on a tiny ensemble (measurement and projection)
and reports what it claims."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mtrl.plugins import get_plugins

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_a_tiny_ensemble_is_measured_and_a_killed_solver_is_seen(tmp_path: Path) -> None:
    if "heat/heat2d" not in get_plugins().envs or shutil.which("gcc") is None:
        pytest.skip("needs plugins_contrib/mtrl-heat and gcc")
    cmd = [sys.executable, str(ROOT / "benchmarks" / "ensemble_scale.py"), "--copies", "3",
           "--steps", "5", "--kills", "1", "--member-kills", "1", "--single-steps", "20",
           "--project", "16",
           "--per-actor", "1,4", "--horizon-s", "5", "--nodes", "2",
           "--results-dir", str(tmp_path)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads((tmp_path / "ensemble_scale.json").read_text())
    (row,) = doc["rows"]
    assert row["copies"] == 3 and row["env_steps_per_s"] > 0 and row["startup_s"] > 0
    assert row["processes_per_copy"] >= 2, "a launcher and its solver, at least, per copy"
    assert 1 < row["memory_per_copy_mb"] < 500
    assert len(row["kill_detected_s"]) == 1 and row["kill_detected_s"][0] is not None
    assert len(row["rebuild_s"]) == 1
    assert doc["single_copy_step"]["median_s"] > 0
    one, four = [r for r in doc["projection"] if r["restart"] == "batch"]
    (member,) = doc["member_restart"]
    (kill,) = member["kills"]
    assert kill["seen_s"] is not None and kill["batch_steps_meanwhile"] > 0
    assert kill["other_copy_steps"] > 0, "the other copies kept stepping"
    assert [r["restart"] for r in doc["projection"]] == ["batch", "batch", "member", "member"]
    assert (one["actors"], four["actors"]) == (16, 4)
    assert 0 < four["utilisation"] <= 1 and four["env_steps_per_s"] > 0
