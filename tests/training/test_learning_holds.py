"""Learning that holds: the quickstart's tasks, once solved, stay solved while training goes on.

Each seed trains the quickstart's three tasks (serial actors: deterministic, so a failure
reproduces) until every task has reached its target (step S), then for as many steps again;
at 2S every task's last-20 mean return must still be at least 0.9 of its target. The two
seeds run in two processes side by side (one core each).
"""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"
SEEDS = (0, 1)
HOLD = 0.9
MAX_STEPS_TO_TARGET = 1_500_000


def _train_past_target(seed: int) -> dict[str, Any]:
    """Train until every task reached its target at S env steps, then up to 2S; results."""
    from mtrl.config import parse_config
    from mtrl.progress import RECENT_EPISODES
    from mtrl.trainer import Trainer

    raw = yaml.safe_load(QUICKSTART.read_text())
    raw.update(seed=seed, total_env_steps=2 * MAX_STEPS_TO_TARGET)
    raw["actors"] = {"mode": "serial"}
    raw["tracking"] = {"console": "quiet", "wandb": {"mode": "disabled"}}
    raw["checkpoint"] = {"enabled": False}

    class HoldTrainer(Trainer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.first: dict[str, int] = {}  # task → env steps when it first reached target
            self.reached_at: int | None = None  # S: when the last task did
            super().__init__(*args, **kwargs)

        def on_unroll(self, task: int, info: Any) -> None:
            steps = self.env_steps
            for r, p in zip(self.results(), self.progress, strict=True):
                if r.solved and p.episodes >= RECENT_EPISODES and r.name not in self.first:
                    self.first[r.name] = steps
            if self.reached_at is None and len(self.first) == len(self.names):
                self.reached_at = steps
            if self.reached_at is None and steps >= MAX_STEPS_TO_TARGET:
                self.request_stop()
            if self.reached_at is not None and steps >= 2 * self.reached_at:
                self.request_stop()

    trainer = HoldTrainer(parse_config(raw), write_run_dir=False, console=False)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    return {
        "seed": seed,
        "reached_at": trainer.reached_at,
        "first": dict(trainer.first),
        "env_steps": result.env_steps,
        "final": {t.name: (t.mean_return, t.target_score) for t in result.tasks},
    }


@pytest.mark.timeout(1500)
def test_quickstart_tasks_stay_solved_for_as_long_again() -> None:
    with ProcessPoolExecutor(len(SEEDS), mp_context=mp.get_context("spawn")) as pool:
        runs = list(pool.map(_train_past_target, SEEDS))
    problems = []
    for run in runs:
        where = f"seed {run['seed']}"
        if run["reached_at"] is None:
            problems.append(f"{where}: not every task reached its target ({run['first']})")
            continue
        for name, (ret, target) in run["final"].items():
            if ret is None or ret < HOLD * target:
                problems.append(
                    f"{where}: {name} ended at {ret} < {HOLD} x {target} after "
                    f"{run['env_steps']:,} steps (all at target by {run['reached_at']:,})"
                )
    assert not problems, "; ".join(problems)
