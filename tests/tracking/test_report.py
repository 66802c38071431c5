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
from mtrl.tracking.report import FIGURES, Plotter, load_run
from mtrl.tracking.report_diagnostics import NAME as DIAGNOSTICS
from mtrl.tracking.report_diagnostics import PANELS, present
from mtrl.tracking.report_summary import format_return
from mtrl.tracking.run_dir import create_run_dir

TASKS = ["cartpole", "minatar/breakout"]
ALL = {f.name for f in FIGURES} | {DIAGNOSTICS}
DISCRETE = ("entropy", "kl", "rho", "rho_clipped", "adv_abs", "value_error", "value_ev")


def _diagnostics(i: int, k: int, figures: tuple[str, ...] = DISCRETE) -> dict[str, float]:
    """What the learner logs for task number ``k`` at record ``i`` (no Gaussian figures)."""
    values = {
        "entropy": 0.7 - 0.02 * i,
        "kl": 1e-4 * (i + 1),
        "rho": 1.0 + 1e-4 * k,
        "rho_clipped": 0.1 * k,
        "adv_abs": 1.0,
        "value_error": 2.0 / (i + 1),
        "value_ev": 1 - 1 / (i + 1),
        "torso_grad_share": 0.5,
    }
    return {f: values[f] for f in figures}


def _task_steps(i: int, k: int) -> int:
    """Task ``k``'s own env steps at record ``i``: task 0 gets a quarter of the run's steps."""
    return 2_500 * i if k == 0 else 7_500 * i


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
            rec[f"task/{t}/env_steps"] = _task_steps(i, k)
            if i > 0:  # no episode finished yet at the first record
                rec[f"task/{t}/return"] = 20 + 10 * i * (k + 1) + seed
                rec[f"task/{t}/normalized_score"] = 0.05 * i
            rec[f"popart/{t}/sigma"] = math.exp(0.3 * i)
            rec[f"popart/{t}/mu"] = 0.1 * i * (k + 1)
            for name, v in _diagnostics(i, k).items():
                rec[f"learner/{t}/{name}"] = v
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


def _write(run: Path, rows: list[dict[str, Any]]) -> Path:
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_diagnostics_page_has_panels_only_for_present_figures(tmp_path: Path) -> None:
    """Two discrete tasks log three figures, a Gaussian one adds its own; PopArt μ absent."""
    rows = []
    for i in range(6):
        rec: dict[str, Any] = {"charts/env_steps": 1000 * i, "charts/elapsed_s": i}
        for k, t in enumerate(["a", "b"]):
            for name, v in _diagnostics(i, k, ("entropy", "kl", "rho")).items():
                rec[f"learner/{t}/{name}"] = v
        rec["learner/c/log_std"] = -0.1 * i
        rec["learner/c/saturated"] = float("nan")  # never finite: no panel
        rows.append(rec)
    small = _write(
        tmp_path / "small", [{k: v for k, v in r.items() if "/c/" not in k} for r in rows]
    )
    wide = _write(tmp_path / "wide", rows)

    tasks, panels = present([load_run(small)], load_run(small).tasks)
    assert tasks == ["a", "b"]
    assert [p.key.split("/")[-1] for p in panels] == ["entropy", "kl", "rho"]
    tasks, panels = present([load_run(small), load_run(wide)], load_run(wide).tasks)
    assert tasks == ["a", "b", "c"]
    assert [p.key.split("/")[-1] for p in panels] == ["entropy", "kl", "rho", "log_std"]

    assert main(["report", str(small), "-o", str(tmp_path / "o1")]) == 0
    assert main(["report", str(small), str(wide), "-o", str(tmp_path / "o2")]) == 0
    one_row = matplotlib.image.imread(tmp_path / "o1" / DIAGNOSTICS)
    two_rows = matplotlib.image.imread(tmp_path / "o2" / DIAGNOSTICS)
    assert one_row.shape[1] > 1.5 * one_row.shape[0]  # 3 panels side by side
    assert two_rows.shape[0] > 1.5 * one_row.shape[0]  # 4 panels: a second row


def test_every_learner_figure_has_a_panel() -> None:
    """A figure the learner logs (mtrl.algorithms.impala.diagnostics) without a panel would go
    unseen."""
    import torch

    from mtrl.algorithms.impala.diagnostics import FIELDS, task_means

    logged = set(task_means(torch.ones(len(FIELDS), dtype=torch.float64), gaussian=True))
    logged |= {"torso_grad_share"}
    keys = {p.key for p in PANELS}
    assert {f"learner/{{task}}/{f}" for f in logged} <= keys
    assert "popart/{task}/mu" in keys


def test_tasks_without_normalised_score_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {
            "charts/env_steps": 100 * i,
            "task/scored/return": i,
            "task/scored/normalized_score": 0.1 * i,
            "task/raw/return": 5 * i,
        }
        for i in range(4)
    ]
    run = _write(tmp_path / "r", rows)
    assert main(["report", str(run), "-o", str(tmp_path / "o")]) == 0
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "no normalised score" in x]
    assert "for: raw;" in line and "scored" not in line


def test_long_run_names_widen_the_image_instead_of_being_clipped(tmp_path: Path) -> None:
    rows = [{"charts/elapsed_s": i, "charts/env_steps": i, "charts/sps": 10.0} for i in range(4)]
    runs = [
        _write(tmp_path / f"a_rather_long_run_directory_name__{s}__20260101", rows)
        for s in range(3)
    ]
    assert main(["report", str(runs[0]), "-o", str(tmp_path / "one")]) == 0
    assert main(["report", *map(str, runs), "-o", str(tmp_path / "three")]) == 0
    one = matplotlib.image.imread(tmp_path / "one" / "throughput.png")
    three = matplotlib.image.imread(tmp_path / "three" / "throughput.png")
    assert three.shape[1] > 1.3 * one.shape[1]  # three ~45-character labels side by side


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.955, "0.955"),
        (474.96, "475"),
        (475.0, "475"),
        (-20.71, "-20.7"),
        (0.0012345, "0.00123"),
        (12345.6, "12346"),
        (0.0, "0"),
        (1.0, "1.00"),
    ],
)
def test_returns_keep_three_significant_digits(value: float, text: str) -> None:
    assert format_return(value) == text


def _keep_figures(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Record each figure's axes (curves, labels, texts) as the real Plotter saves it."""
    kept: dict[str, list[Any]] = {}
    finish = Plotter.finish

    def keep(self: Plotter, fig: Any, axes: Any, name: str, *args: Any, **kw: Any) -> None:
        kept[name] = [
            {
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "xs": [list(line.get_xdata()) for line in ax.get_lines()],
                "texts": [t.get_text() for t in ax.texts],
            }
            for ax in axes
        ]
        finish(self, fig, axes, name, *args, **kw)

    monkeypatch.setattr(Plotter, "finish", keep)
    return kept


def test_task_curves_use_the_tasks_own_env_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = _keep_figures(monkeypatch)
    run = _make_run(tmp_path, seed=0, n=5)
    assert main(["report", str(run)]) == 0
    for k, panel in enumerate(kept["return_vs_steps.png"]):
        assert panel["title"] == TASKS[k]
        assert panel["xlabel"] == "env steps of this task"
        assert panel["xs"] == [[_task_steps(i, k) for i in range(1, 5)]]
    (sigma_of_task_1,) = kept["popart_sigma.png"][1]["xs"]
    assert sigma_of_task_1 == [_task_steps(i, 1) for i in range(5)]
    diagnostics = kept[DIAGNOSTICS][0]  # entropy: one curve per task, each on its own steps
    assert diagnostics["xs"] == [[_task_steps(i, k) for i in range(5)] for k in range(2)]
    assert diagnostics["xlabel"] == "env steps of each task"
    (lag,) = kept["policy_lag.png"][:1]  # a run-wide metric keeps the run's steps
    assert lag["xs"] == [[10_000 * i for i in range(5)]] and lag["xlabel"] == "env steps"


def test_runs_without_task_steps_fall_back_to_the_runs_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = _keep_figures(monkeypatch)
    rows = [{"charts/env_steps": 100 * i, "task/x/return": float(i)} for i in range(1, 4)]
    run = _write(tmp_path / "old", rows)
    assert main(["report", str(run), "-o", str(tmp_path / "o")]) == 0
    (panel,) = kept["return_vs_steps.png"]
    assert panel["xs"] == [[100, 200, 300]] and panel["xlabel"] == "env steps (all tasks)"


def test_returns_are_reported_with_three_significant_digits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = _keep_figures(monkeypatch)
    rows = [
        {
            "charts/env_steps": 100 * i,
            "charts/elapsed_s": float(i),
            "task/frac/return": 0.9 + 0.0183333 * i,  # ends at 0.955
            "task/frac/normalized_score": 0.5,
            "task/big/return": 474.96,
        }
        for i in range(4)
    ]
    runs = [_write(tmp_path / name, rows) for name in ("a", "b")]
    assert main(["report", *map(str, runs), "-o", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert "note: a: last mean return: frac 0.955, big 475" in err
    assert "note: b: last mean return: frac 0.955, big 475" in err
    frac, big = kept["return_vs_steps.png"]
    assert frac["texts"] == ["0.955", "0.955"] and big["texts"] == ["475", "475"]
    assert kept["normalized_score_vs_time.png"][0]["texts"] == ["0.500", "0.500"]
