"""The final greedy evaluation of ``mtrl train``: a few episodes per task with the trained model.

After the last update and the last checkpoint, rank 0 plays ``tracking.final_eval_episodes``
episodes per task with greedy actions of the trainer's in-memory model, through the code of
``mtrl eval`` (:func:`mtrl.train.evaluate.evaluate_model`) and on its env seeds (the training seed
plus ``EVAL_SEED_OFFSET``, never a training seed): ``mtrl eval RUN_DIR --greedy --episodes N``
on the final checkpoint plays the same episodes. The mean return goes beside the training
return in the final table and into the last metrics record as ``eval/<task>/greedy_return``.

Anakin tasks play through the numpy face of their tensor-native env. A task whose actors
failed and recovered is evaluated like any other (an env that raises here is reported and the
run's results stand). Left out, with a line saying why (the table shows '-'):

* a quarantined task: its envs kept failing; ``mtrl eval`` it once they are fixed;
* a task whose env hung in training: the evaluation steps it in this process, where a hang
  could not be cut short (an actor's is, by killing the actor), and the run would never end;
* a task that made no env steps in training ("no steps"): its policy never learned, and an
  eval of it would only launch its env to report an untrained score;
* every task when the model is split over the ranks (``learner.parallel.model_parallel``
  ``task_sharded`` or ``fsdp``): rank 0 does not hold all of it.

An evaluated task shows '-' too when its env gave NaN or inf rewards in the evaluation (its
training unrolls with them were faults, never learned from): a line says so.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mtrl.train.evaluate import evaluate_model
from mtrl.train.progress import TaskResult

if TYPE_CHECKING:
    import torch

    from mtrl.actors.faults import TaskFaults
    from mtrl.config import ExperimentConfig
    from mtrl.learner.distributed import DistContext
    from mtrl.plugins import EnvSpec

#: Batch steps allowed per episode of the final evaluation (Atari's 108k frames / 4).
MAX_STEPS_PER_EPISODE = 27_000


@dataclass
class FinalEval:
    """Mean greedy return per evaluated task (by index); ``episodes`` 0 when none ran."""

    episodes: int = 0
    returns: dict[int, float] = field(default_factory=dict)

    def apply(self, results: list[TaskResult]) -> list[TaskResult]:
        """``results`` with ``greedy_eval`` filled in where a task was evaluated."""
        return [
            dataclasses.replace(r, greedy_eval=self.returns.get(i)) for i, r in enumerate(results)
        ]


def final_eval(
    cfg: ExperimentConfig,
    model: torch.nn.Module,
    specs: Sequence[EnvSpec],
    names: Sequence[str],
    faults: Sequence[TaskFaults],
    record: dict[str, float],
    ctx: DistContext,
    *,
    env_steps: Sequence[int] | None = None,
) -> FinalEval:
    """Evaluate ``model`` greedily (on the main rank only; nothing when the config says 0) and
    add ``eval/<task>/greedy_return`` of each evaluated task to ``record`` (the last one).
    ``faults`` are the actor pool's per-task fault records, ``env_steps`` each task's env steps
    in training (None: not known), both in task order."""
    episodes = cfg.tracking.final_eval_episodes
    if episodes == 0 or not ctx.is_main:
        return FinalEval()
    if ctx.distributed and cfg.learner.parallel.model_parallel != "none":
        print(
            "greedy eval skipped: the model is split over the ranks "
            f"(model_parallel: {cfg.learner.parallel.model_parallel}); "
            "run `mtrl eval RUN_DIR --greedy` on the final checkpoint"
        )
        return FinalEval()
    out = FinalEval(episodes)
    for i, task_faults in enumerate(faults):
        if task_faults.quarantined:
            print(f"greedy eval skipped for {names[i]}: quarantined (its envs kept failing)")
            continue
        if task_faults.by_kind.get("hang", 0):
            print(
                f"greedy eval skipped for {names[i]}: its env hung in training (a hang here "
                "could not be stopped); `mtrl eval RUN_DIR --greedy` plays it on its own"
            )
            continue
        if env_steps is not None and env_steps[i] == 0:
            print(f"greedy eval skipped for {names[i]}: no steps (it made none in training)")
            continue
        try:
            (result,) = evaluate_model(
                model,
                cfg,
                specs,
                [i],
                episodes=episodes,
                modes=("greedy",),
                max_steps_per_episode=MAX_STEPS_PER_EPISODE,
            )
        except Exception as e:  # the training's results stand; say which task and why
            print(f"greedy eval of {names[i]} failed: {type(e).__name__}: {e}")
            continue
        if math.isfinite(result.mean_return):  # NaN: no episode finished in time (warned)
            out.returns[i] = record[f"eval/{names[i]}/greedy_return"] = result.mean_return
        elif result.episodes:  # the env's rewards: the table's '-' says why here
            bad = sum(not math.isfinite(r) for r in result.returns)
            print(
                f"greedy eval of {names[i]}: no score, {bad} of its {result.episodes} "
                "episodes have a non-finite return (the env gave NaN or inf rewards)"
            )
        if result.success_rate is not None:
            record[f"eval/{names[i]}/greedy_success"] = result.success_rate
    return out
