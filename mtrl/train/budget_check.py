"""What ``mtrl validate`` can tell about the task weights before a run: whether the actor
budget can give each task enough env copies for the loss weights to meet its weight.

At equal step costs a task's data share is its share of the env copies stepped (actors x
``num_envs``). With ``fixed`` actors (or serial actors: one unroll of every task per update)
that share is known from the config; ``balanced`` and ``progress`` can move actors, so a task
is short only if even every spare actor would not do. The run measures the real data shares
and says the same when a loss weight is capped (:mod:`mtrl.train.loss_weights`).
"""

from __future__ import annotations

from mtrl.config import ExperimentConfig
from mtrl.scheduler.policies import apportion
from mtrl.scheduler.rebalancer import budget_for
from mtrl.train.loss_weights import weight_shortfalls


def _best_columns(cfg: ExperimentConfig, task: int) -> list[float]:
    """Env copies per task when ``task`` gets every actor the budget can spare."""
    tasks = cfg.tasks
    if cfg.actors.mode == "serial":
        return [float(t.num_envs) for t in tasks]
    budget = budget_for(cfg)
    floor = budget.min_per_task
    if cfg.scheduler.policy == "fixed":
        actors = apportion([t.weight for t in tasks], budget.slots, floor)
    else:
        actors = [floor] * len(tasks)
        actors[task] = budget.slots - floor * (len(tasks) - 1)
    return [float(a * t.num_envs) for a, t in zip(actors, tasks, strict=True)]


def weight_notes(cfg: ExperimentConfig) -> list[str]:
    """One line per task whose weight the budget cannot meet (empty when all can be met or
    loss weighting is off); each says what to change."""
    sc, tasks = cfg.scheduler, cfg.tasks
    if not sc.loss_weights or len(tasks) < 2 or any(t.anakin for t in tasks):
        return []  # Anakin tasks step on the learner's device: not an actor budget
    notes = []
    weights = [t.weight for t in tasks]
    for i, task in enumerate(tasks):
        short = weight_shortfalls(weights, _best_columns(cfg, i), sc.max_loss_weight)
        for j, w_share, c_share in short:
            if j != i:
                continue
            notes.append(
                f"tasks[{i}] ({task.key}): weight share {w_share:.0%}, but the actors can step "
                f"at most {c_share:.0%} of the env copies (scheduler.num_actors "
                f"{sc.num_actors}, policy {sc.policy}, tasks[{i}].num_envs {task.num_envs}); "
                f"loss weights make up at most {sc.max_loss_weight:g}x "
                "(scheduler.max_loss_weight): give it more actors or envs, or a lower weight"
            )
    return notes
