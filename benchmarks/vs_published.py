"""mtrl's learning benchmark beside published single-task results, per task.

    .venv/bin/python benchmarks/vs_published.py docs/results/learning_minatar.json \\
        benchmarks/published/minatar.yaml [--at-frames 5000000] [--out-dir docs/results]
    # prints a markdown table, writes docs/results/vs_published_<name>.json

The learning JSON is what ``benchmarks/learning.py`` wrote; the published file lists, per
source, a score per game (keys are the last part of an env id: ``minatar/breakout`` →
``breakout``), the frames behind it and its citation. Per game the table gives mtrl's final
training return (mean of the last 20 episodes, the figure closest to a moving average of
training returns) as the median and min–max over seeds, its greedy and stochastic evaluation
of the final checkpoint (medians), mtrl's env steps on that game, and each source's score with
the sources mtrl's median final return meets or beats counted per source.

``--at-frames N`` compares at exactly the published budget instead: per seed and game, the
training return (mean of the last 20 episodes) at the last logged record where that game had
made at most N env steps (from each run's ``metrics.jsonl``), so a game that ran a little past
N is not credited with the extra frames. Its median decides "at or above"; the final return
stays in the table beside it.

``--window W`` (with ``--at-frames``) takes that figure over the last W episodes the game
finished within N env steps, from each run's ``episodes.csv`` (every episode is there): the
published MinAtar curves are moving averages over 100 episodes, and a 20-episode window of a
game like breakout swings by a third between records.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result

from mtrl.tracking.episodes import FILENAME as EPISODES_FILE
from mtrl.tracking.episodes import Episodes, read_episodes

METRIC_WINDOW = 20
"""Episodes behind the logged ``task/<id>/return`` (mtrl.train.progress.RECENT_EPISODES)."""


def game_of(task: str) -> str:
    """``minatar/breakout`` → ``breakout``: the key published tables use."""
    return task.rsplit("/", 1)[-1]


def return_at(records: list[dict[str, Any]], task: str, frames: int) -> tuple[float, int] | None:
    """The task's logged training return and env steps at the last record where it had made at
    most ``frames`` env steps (None when no such record has a return)."""
    steps_key, ret_key = f"task/{task}/env_steps", f"task/{task}/return"
    best = None
    for rec in records:
        steps, ret = rec.get(steps_key), rec.get(ret_key)
        if steps is None or steps > frames or not isinstance(ret, int | float):
            continue
        if math.isfinite(ret) and (best is None or steps >= best[1]):
            best = (float(ret), int(steps))
    return best


def window_at(episodes: Episodes, frames: int, window: int) -> tuple[float, int] | None:
    """Mean return of the last ``window`` episodes that ended within ``frames`` of the task's
    env steps, and the env steps of the last of them (None when none did)."""
    within = episodes.env_steps <= frames
    if not within.any():
        return None
    returns, steps = episodes.returns[within], episodes.env_steps[within]
    return float(returns[-window:].mean()), int(steps[-1])


def returns_at(
    learning: dict[str, Any], frames: int, window: int = METRIC_WINDOW
) -> dict[str, list[tuple[float, int]]]:
    """Per task, its return at ``frames`` in every finished run: :func:`return_at` of the run's
    ``metrics.jsonl`` (the logged last-20 mean) when ``window`` is 20, else :func:`window_at`
    of its ``episodes.csv``."""
    out: dict[str, list[tuple[float, int]]] = {task: [] for task in learning["summary"]}
    for run in learning["runs"]:
        if run.get("error"):
            continue
        run_dir = Path(run["run_dir"])
        if window == METRIC_WINDOW:
            path = run_dir / "metrics.jsonl"
            records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            hits = {task: return_at(records, task, frames) for task in out}
        else:
            episodes = read_episodes(run_dir / EPISODES_FILE)
            if not episodes:
                raise SystemExit(
                    f"--window {window}: {run_dir / EPISODES_FILE} is missing (the run predates "
                    "episodes.csv); use the logged last-20 figure (no --window)"
                )
            hits = {t: window_at(episodes[t], frames, window) for t in out if t in episodes}
        for task, hit in hits.items():
            if hit is not None:
                out[task].append(hit)
    return out


def _stat(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def compare(
    learning: dict[str, Any],
    published: dict[str, Any],
    at: dict[str, list[tuple[float, int]]] | None = None,
    frames: int | None = None,
    window: int = METRIC_WINDOW,
) -> dict[str, Any]:
    """Per game: mtrl's figures over seeds and each source's score; per source: how many games
    mtrl's median final return — or, given ``at`` (:func:`returns_at` at ``frames``), its
    median return at that budget — is at or above it, out of the games the source reports."""
    sources = published["sources"]
    games: dict[str, Any] = {}
    for task, summary in learning["summary"].items():
        game = game_of(task)
        steps = [r["tasks"][task]["env_steps"] for r in learning["runs"] if not r.get("error")]
        if not any(game in src["scores"] for src in sources.values()):
            continue
        figure = summary["final"]["median"]
        at_budget = None
        if at is not None and at.get(task):
            at_budget = _stat([r for r, _ in at[task]])
            at_budget["env_steps_max"] = max(s for _, s in at[task])
            figure = at_budget["median"]
        games[game] = {
            "task": task,
            "final": summary["final"],
            "at_frames": at_budget,
            "greedy": summary["greedy"]["median"],
            "stochastic": summary["stochastic"]["median"],
            "env_steps_max": max(steps) if steps else None,
            "published": {
                key: {"score": src["scores"][game], "at_or_above": figure >= src["scores"][game]}
                for key, src in sources.items()
                if game in src["scores"]
            },
        }
    wins = {}
    for key in sources:
        rows = [g["published"][key] for g in games.values() if key in g["published"]]
        wins[key] = {"at_or_above": sum(r["at_or_above"] for r in rows), "games": len(rows)}
    seeds = len(learning["runs"])
    return {"games": games, "wins": wins, "seeds": seeds, "at_frames": frames, "window": window}


def _fmt(x: float) -> str:
    """Three significant digits without exponents (``1000``, ``17.5``, ``0.955``)."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def markdown(result: dict[str, Any], sources: dict[str, Any]) -> str:
    """The comparison as a markdown table, one row per game and a last row of counts."""
    keys = list(sources)
    frames = result.get("at_frames")
    head = ["game"]
    if frames:
        window = result.get("window", METRIC_WINDOW)
        head.append(f"mtrl at {frames / 1e6:g}M frames, last {window} (median [min, max])")
    head += ["mtrl final (median [min, max])", "greedy", "stochastic", "env steps"]
    head += [sources[k]["label"] for k in keys]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for game, g in result["games"].items():
        f, a = g["final"], g.get("at_frames")
        row = [game]
        if frames:
            row.append(
                "-" if a is None else f"{_fmt(a['median'])} [{_fmt(a['min'])}, {_fmt(a['max'])}]"
            )
        row += [
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
    blanks = "| " * (len(head) - len(keys) - 1)
    lines.append("| mtrl at or above " + blanks + "| " + " | ".join(counts) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("learning_json", type=Path)
    ap.add_argument("published", type=Path)
    ap.add_argument("--at-frames", type=int, help="compare at this many env steps per game")
    ap.add_argument(
        "--window",
        type=int,
        default=METRIC_WINDOW,
        help="with --at-frames: episodes averaged (20: the logged figure; else episodes.csv)",
    )
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.window < 1 or (args.window != METRIC_WINDOW and not args.at_frames):
        ap.error("--window takes a positive count of episodes, with --at-frames")
    learning = json.loads(args.learning_json.read_text())
    published = yaml.safe_load(args.published.read_text())
    at = returns_at(learning, args.at_frames, args.window) if args.at_frames else None
    result = compare(learning, published, at, args.at_frames, args.window)
    print(markdown(result, published["sources"]))
    payload = {
        "benchmark": "vs_published",
        "learning": str(args.learning_json),
        "published": str(args.published),
        "git_commit": learning.get("git_commit"),
        "sources": published["sources"],
        **result,
    }
    suffix = "" if args.window == METRIC_WINDOW else f"_last{args.window}"
    path = write_result(f"vs_published_{learning['name']}{suffix}", payload, args.out_dir)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
