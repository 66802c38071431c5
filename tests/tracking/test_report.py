"""`mtrl report`: PNG figures from run directories' metrics, one run and several overlaid."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest

from mtrl.cli import main
from mtrl.config import ExperimentConfig
from mtrl.tracking import make_sinks
from mtrl.tracking.report import FIGURES, load_run
from mtrl.tracking.run_dir import create_run_dir

TASKS = ["cartpole", "minatar/breakout"]
ALL = {f.name for f in FIGURES}


def _make_run(parent: Path, seed: int, n: int = 15) -> Path:
    """A run directory with the metrics a trainer logs, written through the real sinks."""
    cfg = ExperimentConfig.model_validate(
        {
            "name": "rep",
            "seed": seed,
            "tasks": [
                {"env": "gymnasium/CartPole-v1", "name": "cartpole"},
                {"env": "minatar/breakout"},
            ],
            "tracking": {"console": "quiet", "wandb": {"mode": "disabled"}},
        }
    )
    run_dir = create_run_dir(parent, cfg.name, seed, cfg.model_dump(mode="json"))
    sinks = make_sinks(cfg, run_dir, TASKS)
    for i in range(n):
        rec: dict[str, Any] = {
            "charts/env_steps": 10_000 * i,
            "charts/elapsed_s": 5.0 * i,
            "charts/sps": 2000.0 + 100 * seed,
            "charts/policy_lag": 1.0,
            "charts/policy_lag_max": 2.0,
            "losses/total": 1 / (i + 1),
            "losses/grad_norm": 3.0,
        }
        for k, t in enumerate(TASKS):
            if i > 0:  # no episode finished yet at the first record
                rec[f"task/{t}/return"] = 20 + 10 * i * (k + 1) + seed
                rec[f"task/{t}/normalized_score"] = 0.05 * i
            rec[f"popart/{t}/sigma"] = math.exp(0.3 * i)
            rec[f"scheduler/{t}/actors"] = 1 + (i > 7) * k
        sinks.write(rec)
    sinks.close()
    return run_dir


def _assert_pngs(directory: Path, names: set[str]) -> None:
    assert {p.name for p in directory.glob("*.png")} == names
    for name in names:
        image = matplotlib.image.imread(directory / name)
        assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 500, name


def test_report_of_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _make_run(tmp_path, seed=0)
    assert main(["report", str(run)]) == 0
    printed = capsys.readouterr().out.split()
    _assert_pngs(run / "plots", ALL)
    assert sorted(printed) == sorted(str(run / "plots" / n) for n in ALL)


def test_report_overlays_two_runs(tmp_path: Path) -> None:
    a, b = _make_run(tmp_path, seed=0), _make_run(tmp_path, seed=1, n=10)
    out = tmp_path / "cmp"
    assert main(["report", str(a), str(b), "-o", str(out)]) == 0
    _assert_pngs(out, ALL)


def test_figures_without_data_are_skipped(tmp_path: Path) -> None:
    run = tmp_path / "bare"
    run.mkdir()
    rows = [
        {"charts/env_steps": 100 * i, "charts/elapsed_s": i, "task/x/return": i} for i in range(5)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["report", str(run), "-o", str(tmp_path / "o")]) == 0
    _assert_pngs(tmp_path / "o", {"return_vs_steps.png", "return_vs_time.png"})


def test_resumed_run_continues_its_curve_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    run = tmp_path / "resumed"
    run.mkdir()
    steps = [0, 100, 200, 300, 400, 200, 300, 400, 500]  # crashed at 400, resumed from 200
    lines = [json.dumps({"charts/env_steps": s, "i": i}) for i, s in enumerate(steps)]
    (run / "metrics.jsonl").write_text("\n".join(lines) + '\n{"charts/env_st')
    with pytest.warns(UserWarning, match="skipped 1 unreadable line"):
        data = load_run(run)
    assert [r["charts/env_steps"] for r in data.records] == [0, 100, 200, 300, 400, 500]
    assert [r["i"] for r in data.records] == [0, 1, 5, 6, 7, 8]


def test_report_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "missing: no such run directory" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "no metrics.jsonl here" in capsys.readouterr().err
