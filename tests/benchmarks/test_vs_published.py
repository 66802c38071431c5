"""benchmarks/vs_published.py: mtrl's learning figures beside published per-game scores."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import vs_published as vp  # noqa: E402


def _summary(final: float) -> dict[str, Any]:
    stat = {"median": final, "min": final - 1, "max": final + 1, "n": 2}
    return {"final": stat, "greedy": stat, "stochastic": stat}


LEARNING: dict[str, Any] = {
    "name": "toy",
    "summary": {
        "minatar/breakout": _summary(12.0),
        "minatar/freeway": _summary(40.0),
        "gymnasium/CartPole-v1": _summary(500.0),
    },
    "runs": [
        {
            "tasks": {
                "minatar/breakout": {"env_steps": 5e6},
                "minatar/freeway": {"env_steps": 4e6},
                "gymnasium/CartPole-v1": {"env_steps": 1e5},
            }
        },
        {"error": "mtrl train exited with 1", "tasks": {}},
    ],
}
PUBLISHED: dict[str, Any] = {
    "sources": {
        "a": {"label": "A", "scores": {"breakout": 10, "freeway": 50}},
        "b": {"label": "B", "scores": {"breakout": 17.5}},
    }
}


def test_counts_games_at_or_above_each_source_and_skips_unpublished_tasks() -> None:
    result = vp.compare(LEARNING, PUBLISHED)
    assert set(result["games"]) == {"breakout", "freeway"}
    assert result["wins"] == {
        "a": {"at_or_above": 1, "games": 2},
        "b": {"at_or_above": 0, "games": 1},
    }
    assert result["games"]["breakout"]["env_steps_max"] == 5e6
    assert result["games"]["freeway"]["published"]["a"] == {"score": 50, "at_or_above": False}


def test_ties_count_as_at_or_above() -> None:
    tie = {**LEARNING, "summary": {"minatar/breakout": _summary(10.0)}}
    assert vp.compare(tie, PUBLISHED)["wins"]["a"]["at_or_above"] == 1


def test_table_and_the_shipped_published_file() -> None:
    published = yaml.safe_load((BENCH / "published" / "minatar.yaml").read_text())
    games = {"asterix", "breakout", "freeway", "seaquest", "space_invaders"}
    for key, src in published["sources"].items():
        assert set(src["scores"]) <= games, key
        assert src["cite"] and src["frames"] > 0, key
    table = vp.markdown(vp.compare(LEARNING, published), published["sources"])
    assert "| breakout | 12 [11, 13] |" in table
    assert table.splitlines()[-1].startswith("| mtrl at or above |")


def test_return_at_takes_the_last_record_within_the_budget() -> None:
    key = "minatar/breakout"
    records = [
        {f"task/{key}/env_steps": 1_000, f"task/{key}/return": 2.0},
        {f"task/{key}/env_steps": 4_900, f"task/{key}/return": float("nan")},
        {f"task/{key}/env_steps": 4_800, f"task/{key}/return": 9.0},
        {f"task/{key}/env_steps": 5_100, f"task/{key}/return": 30.0},
        {"task/other/env_steps": 10},
    ]
    assert vp.return_at(records, key, 5_000) == (9.0, 4_800)
    assert vp.return_at(records, key, 500) is None


def test_at_frames_return_decides_and_final_stays_beside_it() -> None:
    at = {"minatar/breakout": [(9.0, 4_990_000), (11.0, 5_000_000)]}
    result = vp.compare(LEARNING, PUBLISHED, at, 5_000_000)
    breakout = result["games"]["breakout"]
    assert breakout["at_frames"]["median"] == 10.0
    assert breakout["at_frames"]["env_steps_max"] == 5_000_000
    assert breakout["final"]["median"] == 12.0
    assert breakout["published"]["a"]["at_or_above"] is True  # 10 >= 10
    assert breakout["published"]["b"]["at_or_above"] is False
    # a game with no record within the budget falls back to its final return
    assert result["games"]["freeway"]["at_frames"] is None
    table = vp.markdown(result, PUBLISHED["sources"])
    assert "at 5M frames" in table
    assert all(line.count("|") == table.splitlines()[0].count("|") for line in table.splitlines())


def test_window_at_averages_the_last_episodes_within_the_budget(tmp_path: Path) -> None:
    """``--window``: the figure over the last W episodes a game finished within the budget,
    read from each run's episodes.csv (a later episode past the budget does not count)."""
    rows = ["task,env_steps,return,length,wall_s"]
    rows += [f"minatar/breakout,{s},{r},10,{i}" for i, (s, r) in enumerate(
        [(1_000, 1.0), (2_000, 2.0), (3_000, 4.0), (4_000, 6.0), (6_000, 100.0)]
    )]  # fmt: skip
    rows.append("minatar/freeway,9000,50,10,9")  # no episode within the budget
    (tmp_path / "episodes.csv").write_text("\n".join(rows) + "\n")
    learning = {
        "summary": {"minatar/breakout": {}, "minatar/freeway": {}},
        "runs": [{"run_dir": str(tmp_path)}, {"error": "exited with 1"}],
    }
    at = vp.returns_at(learning, 5_000, window=3)
    assert at == {"minatar/breakout": [(4.0, 4_000)], "minatar/freeway": []}  # (2 + 4 + 6) / 3
    result = vp.compare(LEARNING, PUBLISHED, at, 5_000, window=3)
    assert "last 3" in vp.markdown(result, PUBLISHED["sources"])
    missing = {**learning, "runs": [{"run_dir": str(tmp_path / "none")}]}
    with pytest.raises(SystemExit, match=r"episodes\.csv is missing"):
        vp.returns_at(missing, 5_000, window=3)
