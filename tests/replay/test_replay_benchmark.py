"""benchmarks/replay_throughput.py runs end to end on small sizes and writes its figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import replay_throughput as rt  # noqa: E402


def test_writes_every_figure(tmp_path: Path) -> None:
    args = ["--seconds", "0.01", "--capacity", "3000", "--pixel-capacity", "400"]
    rt.main([*args, "--torchrl-python", sys.executable, "--out", str(tmp_path)])
    got = json.loads((tmp_path / "replay_throughput.json").read_text())
    rates = {k: v for k, v in got["mtrl"].items() if k.endswith("_per_s")}
    assert len(rates) == 4 and all(v > 0 for v in rates.values())
    assert got["mtrl"]["sample_capacity"] == 3000
    assert got["mtrl"]["insert_atari84x84x4_capacity"] == 400
    # an interpreter without torchrl: the comparison says why it is missing, the rest stands
    assert "torchrl" in got["torchrl"]["skipped"]
