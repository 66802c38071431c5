"""The public multi-task SAC peer on MT10 (benchmarks/peers/mt10_mtmhsac.py) gives
benchmarks/metaworld_figure.py an arm: a learning JSON whose run has a training-success curve
against env steps and a final greedy success per task, read by the figure's own loader; the
peer runs pinned to one CPU.

It runs the Meta-World+ authors' code in its peer venv at the smallest budget that makes the
whole pipeline turn: 5,000 env steps of the random warm start (one episode per task) and one
evaluation episode per task each way (~1 min alone, ~3 min on a loaded machine). Skipped where
that venv is not built; no network: the venv is built beforehand
(``venvs.py metaworld_algorithms``)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
import metaworld_figure as mf  # noqa: E402
import venvs  # noqa: E402

PEER = "metaworld_algorithms"
STAMP = venvs.VENVS / PEER / ".mtrl-stamp"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (venvs.python_of(PEER).exists() and STAMP.exists()),
        reason=(
            f"peer venv {PEER!r} not built in {venvs.VENVS}: build it with "
            "METAWORLD_ALGORITHMS_SRC=<clone of rainx0r/metaworld-algorithms> "
            ".venv/bin/python benchmarks/peers/venvs.py metaworld_algorithms "
            "(MTRL_PEER_VENVS names a shared venv folder)"
        ),
    ),
]


def test_the_peer_run_is_an_arm_of_the_metaworld_figure(tmp_path: Path) -> None:
    import mt10_mtmhsac as peer

    out = tmp_path / "results"
    argv = [
        "--seed-list",
        "3",
        "--total-env-steps",
        "5000",
        "--warmstart-env-steps",
        "5000",
        "--eval-episodes",
        "1",
        "--record-every",
        "2500",
        "--name",
        "peer_test",
        "--work-dir",
        str(tmp_path / "runs"),
        "--out-dir",
        str(out),
    ]
    assert peer.main(argv) == 0
    doc = json.loads((out / "learning_peer_test.json").read_text())
    [run] = doc["runs"]
    assert run["error"] is None and run["env_steps"] == 5000
    assert doc["peer"]["commit"] == venvs.METAWORLD_ALGORITHMS_COMMIT
    assert doc["peer"]["cpu"] == max(os.sched_getaffinity(0))  # pinned: one core, as ours
    assert run["versions"]["metaworld"] == "3.1.1"
    tasks = run["tasks"]
    assert len(tasks) == 10 and all(name.startswith("metaworld/") for name in tasks)
    assert all(len(t["successes"]) == 1 for t in tasks.values())
    # What the figure takes: the curve from the run dir's metrics, the greedy figure per task.
    [fig_run] = mf.load_runs([out / "learning_peer_test.json"], {})
    assert fig_run["seed"] == 3 and fig_run["env_steps"] == 5000
    # 5,000 env steps are one 500-step episode per task: the record at 2,500 has no success yet
    assert fig_run["success_curve"]["steps"] == [5000.0]
    assert all(0.0 <= s <= 1.0 for s in fig_run["success_curve"]["success"])
    assert fig_run["greedy_success"] is not None
    assert set(fig_run["per_task_greedy"]) == set(tasks)
    assert mf.arm_figures([fig_run])["greedy_success_final"]["n"] == 1
