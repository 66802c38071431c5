"""mtrl's learning benchmark beside published single-task results, per task.

    .venv/bin/python benchmarks/vs_published.py docs/results/learning_minatar.json \\
        benchmarks/published/minatar.yaml [--out-dir docs/results]
    # prints a markdown table, writes docs/results/vs_published_<name>.json

The learning JSON is what ``benchmarks/learning.py`` wrote; the published file lists, per
source, a score per game (keys are the last part of an env id: ``minatar/breakout`` →
``breakout``), the frames behind it and its citation. Per game the table gives mtrl's final
training return (mean of the last 20 episodes, the figure closest to a moving average of
training returns) as the median and min–max over seeds, its greedy and stochastic evaluation
of the final checkpoint (medians), mtrl's env steps on that game, and each source's score with
the sources mtrl's median final return meets or beats counted per source.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result


def game_of(task: str) -> str:
    """``minatar/breakout`` → ``breakout``: the key published tables use."""
    return task.rsplit("/", 1)[-1]


def compare(learning: dict[str, Any], published: dict[str, Any]) -> dict[str, Any]:
    """Per game: mtrl's figures over seeds and each source's score; per source: how many games
    mtrl's median final return is at or above it, out of the games the source reports."""
    sources = published["sources"]
    games: dict[str, Any] = {}
    for task, summary in learning["summary"].items():
        game = game_of(task)
        steps = [r["tasks"][task]["env_steps"] for r in learning["runs"] if not r.get("error")]
        final = summary["final"]["median"]
        if not any(game in src["scores"] for src in sources.values()):
            continue
        games[game] = {
            "task": task,
            "final": summary["final"],
            "greedy": summary["greedy"]["median"],
            "stochastic": summary["stochastic"]["median"],
            "env_steps_max": max(steps) if steps else None,
            "published": {
                key: {"score": src["scores"][game], "at_or_above": final >= src["scores"][game]}
                for key, src in sources.items()
                if game in src["scores"]
            },
        }
    wins = {}
    for key in sources:
        rows = [g["published"][key] for g in games.values() if key in g["published"]]
        wins[key] = {"at_or_above": sum(r["at_or_above"] for r in rows), "games": len(rows)}
    return {"games": games, "wins": wins, "seeds": len(learning["runs"])}


def _fmt(x: float) -> str:
    """Three significant digits without exponents (``1000``, ``17.5``, ``0.955``)."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def markdown(result: dict[str, Any], sources: dict[str, Any]) -> str:
    """The comparison as a markdown table, one row per game and a last row of counts."""
    keys = list(sources)
    head = ["game", "mtrl final (median [min, max])", "greedy", "stochastic", "env steps"]
    head += [sources[k]["label"] for k in keys]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for game, g in result["games"].items():
        f = g["final"]
        row = [
            game,
            f"{_fmt(f['median'])} [{_fmt(f['min'])}, {_fmt(f['max'])}]",
            _fmt(g["greedy"]),
            _fmt(g["stochastic"]),
            f"{g['env_steps_max'] / 1e6:.2f}M" if g["env_steps_max"] else "-",
        ]
        for k in keys:
            p = g["published"].get(k)
            row.append("-" if p is None else f"{p['score']:g}" + (" ✓" if p["at_or_above"] else ""))
        lines.append("| " + " | ".join(row) + " |")
    counts = [f"{result['wins'][k]['at_or_above']}/{result['wins'][k]['games']}" for k in keys]
    lines.append("| mtrl at or above | | | | | " + " | ".join(counts) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("learning_json", type=Path)
    ap.add_argument("published", type=Path)
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    learning = json.loads(args.learning_json.read_text())
    published = yaml.safe_load(args.published.read_text())
    result = compare(learning, published)
    print(markdown(result, published["sources"]))
    payload = {
        "benchmark": "vs_published",
        "learning": str(args.learning_json),
        "published": str(args.published),
        "git_commit": learning.get("git_commit"),
        "sources": published["sources"],
        **result,
    }
    path = write_result(f"vs_published_{learning['name']}", payload, args.out_dir)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
