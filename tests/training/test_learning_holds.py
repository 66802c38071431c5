"""Learning that holds: the quickstart's tasks, once learned, stay learned while training goes on.

Each seed trains the quickstart's three tasks (serial actors: deterministic, so a failure
reproduces) until every task's last-20 return has reached 0.9 of its target (step S), then for
as many steps again, under a learning-rate schedule planned for twice the quickstart (so the
rate is still about half its start at 2S). At 2S the final agent, evaluated greedily on eval
seeds, must still score at least 0.9 of every target. (The exploring policy's training return
does not hold that well yet at that rate — InvertedPendulum fell to 660–740 in this test —
docs/BENCHMARKS.md, "Learning that holds".) The two seeds run in two processes side by side.
"""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.slow

QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"
SEEDS = (0, 1)
HOLD = 0.9
MAX_STEPS_TO_TARGET = 900_000  # to 0.9 x every target (the quickstart ends solved at 1.8M)


def _train_past_target(seed: int) -> dict[str, Any]:
    """Train until every task reached 0.9 of its target at S env steps, then up to 2S."""
    from mtrl.config import parse_config
    from mtrl.train.progress import RECENT_EPISODES
    from mtrl.train.trainer import Trainer

    raw = yaml.safe_load(QUICKSTART.read_text())
    # The learning rate anneals over total_env_steps: a schedule of twice the budget to 0.9 x
    # target, so the rate is still about half its start at 2S.
    raw.update(seed=seed, total_env_steps=2 * MAX_STEPS_TO_TARGET)
    raw["actors"] = {"mode": "serial"}
    raw["tracking"] = {"console": "quiet", "wandb": {"mode": "disabled"}, "final_eval_episodes": 20}
    raw["checkpoint"] = {"enabled": False}

    class HoldTrainer(Trainer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.first: dict[str, int] = {}  # task → env steps when it first reached 0.9 x target
            self.reached_at: int | None = None  # S: when the last task did
            super().__init__(*args, **kwargs)

        def on_unroll(self, task: int, info: Any) -> None:
            steps = self.env_steps
            for r, p in zip(self.results(), self.progress, strict=True):
                reached = r.mean_return is not None and r.mean_return >= HOLD * r.target_score
                if reached and p.episodes >= RECENT_EPISODES and r.name not in self.first:
                    self.first[r.name] = steps
            if self.reached_at is None and len(self.first) == len(self.names):
                self.reached_at = steps
            if self.reached_at is None and steps >= MAX_STEPS_TO_TARGET:
                self.request_stop()
            if self.reached_at is not None and steps >= 2 * self.reached_at:
                self.request_stop()

    trainer = HoldTrainer(parse_config(yaml.safe_dump(raw)), write_run_dir=False, console=False)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    return {
        "seed": seed,
        "reached_at": trainer.reached_at,
        "first": dict(trainer.first),
        "env_steps": result.env_steps,
        "final": {t.name: (t.mean_return, t.greedy_eval, t.target_score) for t in result.tasks},
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
        for name, (ret, greedy, target) in run["final"].items():
            if greedy is None or greedy < HOLD * target:
                problems.append(
                    f"{where}: {name} greedy eval {greedy} < {HOLD} x {target} after "
                    f"{run['env_steps']:,} steps (all at 0.9 x target by {run['reached_at']:,}; "
                    f"last-20 training return {ret})"
                )
    assert not problems, "; ".join(problems)
