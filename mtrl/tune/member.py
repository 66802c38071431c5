"""One member of a population: a Ray Tune function trainable that trains an mtrl run one
interval at a time.

A member builds one :class:`~mtrl.train.trainer.Trainer` of its config (the base config with
the member's current hyperparameters, :func:`mtrl.tune.space.apply`), loads its newest
checkpoint into it, and then, interval after interval, trains ``tune.interval_env_steps`` more
env steps, writes a checkpoint and reports its score to Ray Tune with that checkpoint — the
same trainer, its actors kept running, for as long as Ray Tune lets the member go on (a
synchronous population pauses members at each meeting, which ends the trainer; an asynchronous
one only restarts a member that copies another). When PBT exploits, Ray Tune
starts the member again from a better member's checkpoint and with explored hyperparameters:
the weights, optimiser state, PopArt statistics, progress counters and actor counts all come
from the checkpoint (exactly what ``mtrl train --resume`` restores); the hyperparameters come
from the member's new config. The step-size schedule runs over the whole budget
(``total_env_steps``), not over an interval. Each interval is recorded in the member's run
directory (:mod:`mtrl.tune.history`), with the member it copied after an exploit.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtrl.actors.protocol import UnrollInfo
from mtrl.checkpoint import load_latest
from mtrl.config import ExperimentConfig
from mtrl.errors import UserError
from mtrl.tracking.run_dir import create_run_dir
from mtrl.train.final_eval import FinalEval
from mtrl.train.progress import TaskResult
from mtrl.train.trainer import Trainer
from mtrl.tune.history import (
    Interval,
    member_run_dir,
    read_origin,
    record_interval,
    write_origin,
)
from mtrl.tune.space import apply

__all__ = [
    "IntervalTrainer",
    "MemberTrainer",
    "member_run_name",
    "member_score",
    "target_fraction",
    "train_interval",
    "train_member",
]


class IntervalTrainer(Trainer):
    """A trainer that stops once the run's env steps reach ``stop_at`` (an interval's end)."""

    def __init__(self, cfg: ExperimentConfig, stop_at: int, **kw: Any) -> None:
        super().__init__(cfg, **kw)
        self.stop_at = stop_at

    def on_unroll(self, task: int, info: UnrollInfo) -> None:
        if self.run_env_steps >= self.stop_at:
            self.request_stop()

    def run_final_eval(self, record: dict[str, float]) -> FinalEval:
        """The greedy evaluation, only once the interval ends the run's budget."""
        if self.run_env_steps < self.cfg.total_env_steps:
            return FinalEval()
        return super().run_final_eval(record)


def target_fraction(mean_return: float, target: float, random: float | None) -> float:
    """How far a task's return has come from random (``random``; 0 where unknown) to its
    target: 0 at random, 1 at the target, above 1 past it."""
    low = 0.0 if random is None else random
    if target == low:
        raise UserError(
            f"tune.metric: target: a target_score of {target:g} is the task's random score; "
            "the way to it cannot be measured"
        )
    return (mean_return - low) / (target - low)


def member_score(
    results: list[TaskResult], metric: str, random_scores: list[float | None] | None = None
) -> float:
    """What ranks a member: the mean over tasks of the recent normalised score (``metric:
    normalized_score``), of the way to each task's target (``target``, from ``random_scores``:
    each task's env's registered random score or None) or of the mean return (``return``);
    -inf until every task has ended an episode."""
    if metric == "target":
        randoms = random_scores or [None] * len(results)
        values = [
            target_fraction(r.mean_return, r.target_score, low)
            for r, low in zip(results, randoms, strict=True)
            if r.mean_return is not None and r.target_score is not None
        ]
        return sum(values) / len(values) if len(values) == len(results) else float("-inf")
    if metric == "normalized_score":
        missing = [r.name for r in results if r.normalized_score is None and r.episodes > 0]
        if missing:
            raise UserError(
                f"tune.metric: normalized_score, but task(s) {', '.join(missing)} have no "
                "normalised score (their env registers no random and reference score): use "
                "tune.metric: target (each task's target_score) or return"
            )
        values = [r.normalized_score for r in results if r.normalized_score is not None]
    else:
        values = [r.mean_return for r in results if r.mean_return is not None]
    return sum(values) / len(values) if len(values) == len(results) else float("-inf")


class MemberTrainer:
    """A member's trainer across its intervals: built on the first :meth:`advance` from
    ``state`` (a checkpoint's; None: from scratch), then trained on interval by interval
    with its actors running in between; :meth:`close` ends it.

    ``member`` (its index in the population) shifts the env seeds and reseeds the random
    generators after the checkpoint is loaded: a member that copied another's checkpoint would
    otherwise replay the other's episodes and action samples."""

    def __init__(
        self,
        cfg: ExperimentConfig,
        run_dir: Path,
        state: dict[str, Any] | None,
        plugins: Any = None,
        member: int = 0,
    ) -> None:
        if plugins is None:
            from mtrl.plugins import get_plugins

            plugins = get_plugins()
        self.cfg, self.run_dir, self.plugins, self.member = cfg, run_dir, plugins, member
        self._state = state
        self.trainer: IntervalTrainer | None = None
        self.randoms = [plugins.envs.get(t.env).random_score for t in cfg.tasks]

    def _build(self, stop_at: int) -> IntervalTrainer:
        cfg, state = self.cfg, self._state
        updates = int(state["updates"]) if state is not None else 0
        tracking = cfg.tracking.model_copy(update={"console": "quiet"})
        trainer = IntervalTrainer(
            cfg.model_copy(update={"tracking": tracking}),
            stop_at,
            plugins=self.plugins,
            console=False,
            run_dir=self.run_dir,
            seed_offset=(1_000_003 * (updates + 1) if state is not None else 0)
            + 7919 * self.member,
        )
        try:
            if state is not None:
                trainer.load_state_dict(state)
                seed = cfg.seed * 1_000_003 + self.member * 7919 + updates
                torch.manual_seed(seed)
                np.random.seed(seed % 2**32)
        except BaseException:
            trainer.close()
            raise
        self._state = None  # held by the trainer now
        return trainer

    def advance(self, stop_at: int) -> tuple[dict[str, Any], Path, float]:
        """Train until the run's env steps reach ``stop_at``; returns the new checkpoint's
        state, its path and the member's score. The final greedy evaluation runs only when
        ``stop_at`` ends the budget."""
        if self.trainer is None:
            self.trainer = self._build(stop_at)
        self.trainer.stop_at = stop_at
        result = self.trainer.run()
        metric = self.cfg.tune.metric if self.cfg.tune is not None else "return"
        score = member_score(result.tasks, metric, self.randoms)
        new_state, path = load_latest(self.run_dir)
        return new_state, path, score

    def close(self) -> None:
        """Stop the trainer's actors (safe to call twice)."""
        if self.trainer is not None:
            self.trainer.close()
            self.trainer = None


def train_interval(
    cfg: ExperimentConfig,
    run_dir: Path,
    state: dict[str, Any] | None,
    stop_at: int,
    plugins: Any = None,
    member: int = 0,
) -> tuple[dict[str, Any], Path, float]:
    """One interval of a fresh :class:`MemberTrainer` (built from ``state``, closed after):
    train ``cfg`` in ``run_dir`` until the run's env steps reach ``stop_at``; returns the new
    checkpoint's state, its path and the member's score."""
    trainer = MemberTrainer(cfg, run_dir, state, plugins, member)
    try:
        return trainer.advance(stop_at)
    finally:
        trainer.close()


def train_member(config: dict[str, Any], base: dict[str, Any], experiment: str) -> None:
    """Ray Tune's entry point for one member (``config``: its hyperparameters by dotted path;
    ``base``: the whole config as plain data; ``experiment``: the population's directory, where
    the member's run directory goes)."""
    from ray import tune

    from mtrl.plugins import get_plugins

    cfg = apply(ExperimentConfig.model_validate(base), config)
    interval = cfg.tune.interval_env_steps if cfg.tune is not None else cfg.total_env_steps
    context = tune.get_context()
    trial = Path(context.get_trial_dir()).name  # Ray's trial directory's name
    member = int(context.get_trial_id().rsplit("_", 1)[-1])  # "<experiment>_<index>"
    state, origin = None, None
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:  # a restart: its own (resume) or a better member's (exploit)
        with checkpoint.as_directory() as d:
            state, _ = load_latest(d)
            origin = read_origin(Path(d))
    copied_from = origin if origin != trial else None
    run_dir = _run_dir(Path(experiment) / trial, cfg, member)
    done = int(state["env_steps"]) if state is not None else 0
    trainer = MemberTrainer(cfg, run_dir, state, get_plugins(), member)
    started = True
    try:  # one trainer for every interval Ray Tune lets this call run (module docstring)
        while True:
            stop_at = min(done + interval, cfg.total_env_steps)
            state, path, score = trainer.advance(stop_at)
            steps = int(state["env_steps"])
            if steps > done:  # not an interval cut short before its first update (Ctrl-C)
                record_interval(run_dir, Interval(steps, score, dict(config), copied_from, started))
                copied_from, started = None, False
            done = steps
            with tempfile.TemporaryDirectory() as tmp:  # laid out as a run directory's
                (Path(tmp) / path.parent.name).mkdir()
                shutil.copy2(path, Path(tmp) / path.parent.name / path.name)
                write_origin(Path(tmp), trial)
                tune.report(
                    {"score": score, "env_steps": steps, "run_dir": str(run_dir)},
                    checkpoint=tune.Checkpoint.from_directory(tmp),
                )
            if steps >= cfg.total_env_steps:
                return
    finally:
        trainer.close()


def member_run_name(name: str, member: int) -> str:
    """The name of member ``member``'s run directory (before its seed and time): the
    population's ``name`` and the member's index, so that the members' runs side by side
    (``mtrl report``'s legends, a run list) are told apart."""
    return f"{name}-member{member}"


def _run_dir(home: Path, cfg: ExperimentConfig, member: int) -> Path:
    """The member's run directory under its trial directory (made once, then continued)."""
    found = member_run_dir(home)
    if found is not None:
        return found
    name = member_run_name(cfg.name, member)
    return create_run_dir(home / "run", name, cfg.seed, cfg.model_dump(mode="json"))
