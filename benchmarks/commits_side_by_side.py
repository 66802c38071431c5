"""The learner's speed at two commits, side by side: ``benchmarks/learner_update.py`` of each
checkout on the same config, alternating, in one sitting on one machine.

    .venv/bin/python benchmarks/commits_side_by_side.py --old 7cc8e5e configs/quickstart.yaml \\
        [--rounds 3] [--updates 20] [--set task_copies=10] [--python .venv-metaworld/bin/python]

``--old`` is a commit (a worktree of it is made under the system's temp folder, once) or the
path of a checkout; the new side is this checkout. Each round runs the old checkout's
benchmark, then the new one's, each in its own process with its own checkout first on
``sys.path``, so a machine whose load drifts weighs on both alike; the median of the rounds is
reported with every round, and the new side's speed-up. A config inside this checkout is read
by each side from its own checkout (a key added since the old commit, such as one pinning what
an older default gave, would stop the old side's parser), or by both from this one
(``--same-config``); where the two files differ, their differing lines are printed and
recorded, so a change of shapes is seen. Writes
``docs/results/side_by_side_<config>_<old>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

ROOT = Path(__file__).resolve().parent.parent


def checkout(old: str) -> Path:
    """``old`` as a checkout: a path as it is, a commit as a worktree (made once)."""
    path = Path(old)
    if path.is_dir():
        return path.resolve()
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", old],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tree = Path(tempfile.gettempdir()) / f"mtrl-worktree-{rev}"
    if not tree.is_dir():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev], check=True
        )
    return tree


def run_once(tree: Path, python: str, config: Path, extra: list[str]) -> dict[str, Any]:
    """One ``learner_update.py`` run in ``tree``; its result record."""
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        cmd = [python, "benchmarks/learner_update.py", str(config), "--out-dir", out, *extra]
        subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True, text=True)
        (result,) = Path(out).glob("learner_update_*.json")
        return json.loads(result.read_text())


def side_config(tree: Path, config: Path) -> Path:
    """``config`` as ``tree`` holds it: its own copy where ``config`` lies in this checkout."""
    try:
        own = tree / config.relative_to(ROOT)
    except ValueError:
        return config
    return own if own.is_file() else config


def config_difference(old: Path, new: Path) -> list[str]:
    """The lines of two config files that differ (``-`` old, ``+`` new), none when equal."""
    a, b = old.read_text().splitlines(), new.read_text().splitlines()
    gone = [f"- {line}" for line in a if line not in b]
    return gone + [f"+ {line}" for line in b if line not in a]


def unit(record: dict[str, Any]) -> str:
    """The figure that bounds a run: ms per gradient step (SAC), else ms per update."""
    return "ms_per_gradient_step" if "ms_per_gradient_step" in record else "ms_per_update"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", type=Path)
    ap.add_argument("--old", required=True, help="a commit or the path of a checkout")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--updates", type=int, default=20)
    ap.add_argument("--task-copies", type=int, default=1)
    ap.add_argument("--python", default=sys.executable, help="the interpreter of both sides")
    ap.add_argument("--out-dir", type=Path, default=None)
    ap.add_argument(
        "--same-config",
        action="store_true",
        help="both sides read this checkout's config (where the old side's parser knows its "
        "keys and its own copy has other shapes)",
    )
    args = ap.parse_args(argv)
    old = checkout(args.old)
    args.python = str(Path(args.python).absolute())  # each side runs in its own folder
    config = args.config.resolve()
    extra = ["--updates", str(args.updates)]
    if args.task_copies > 1:
        extra += ["--task-copies", str(args.task_copies)]
    sides = {"old": old, "new": ROOT}
    configs = {
        side: config if args.same_config else side_config(tree, config)
        for side, tree in sides.items()
    }
    differ = config_difference(configs["old"], configs["new"])
    for line in differ:
        print(f"config differs: {line}")
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for round_ in range(args.rounds):
        for side, tree in sides.items():
            record = run_once(tree, args.python, configs[side], extra)
            runs[side].append(record)
            print(f"round {round_ + 1}, {side}: {record[unit(record)]:.2f} {unit(record)}")
    key = unit(runs["new"][0])
    ms = {side: [r[key] for r in rs] for side, rs in runs.items()}
    median = {side: float(np.median(v)) for side, v in ms.items()}
    speedup = median["old"] / median["new"]
    for side in sides:
        rounds = ", ".join(f"{x:.2f}" for x in ms[side])
        print(f"{side:>4}: {median[side]:.2f} {key} (rounds {rounds})")
    print(f"new is {speedup:.2f}x as fast as old ({old.name})")
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    old_commit = subprocess.run(
        ["git", "-C", str(old), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    result = {
        "benchmark": "commits_side_by_side",
        "machine": machine(),
        "config": str(args.config),
        "config_difference": differ,
        "task_copies": args.task_copies,
        "old_commit": old_commit,
        "new_commit": commit,
        "unit": key,
        key: ms,
        "median": median,
        "speedup": speedup,
        "anatomy_new": runs["new"][0].get("anatomy"),
    }
    copies = f"_x{args.task_copies}" if args.task_copies > 1 else ""
    name = f"side_by_side_{args.config.stem}{copies}"
    path = write_result(f"{name}_{old_commit}", result, args.out_dir)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
