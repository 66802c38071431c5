"""Run a population (``mtrl tune``): Ray Tune's PBT or PB2 scheduler over
:func:`mtrl.tune.member.train_member`, on the config's Ray (an embedded one on this machine,
reachable on loopback only, or the cluster ``actors.ray.address`` / ``RAY_ADDRESS`` names).

Every member gets an equal share of the cluster's CPUs as its Ray resources, so the whole
population trains at once; each member's actors are its own processes. The scheduler
(:mod:`mtrl.tune.schedulers`) ranks the members at equal env steps.

A replay-based rule's members keep their replay in their checkpoints
(:mod:`mtrl.tune.replay`), and Ray Tune's own resume hint (``Tuner.restore``) is not printed
(:mod:`mtrl.tune.ray_hint`): ``mtrl tune`` says how to continue.

Results: Ray Tune's experiment directory ``DIR/NAME`` (a trial directory per member, holding
the member's mtrl run directory, ``run/NAME-memberI__SEED__TIME``; on a multi-node cluster
``DIR`` must be shared storage), and ``DIR/NAME/members.csv``: each member's
hyperparameters, score and env steps at its end.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtrl.config import ExperimentConfig
from mtrl.errors import UserError
from mtrl.plugins import get_plugins
from mtrl.tune.member import train_member
from mtrl.tune.ray_hint import without_restore_hint
from mtrl.tune.replay import keep_replay
from mtrl.tune.space import param_space

__all__ = ["MemberResult", "run_population"]


@dataclass(frozen=True)
class MemberResult:
    """How one member ended."""

    trial: str
    hyperparameters: dict[str, Any]
    score: float | None
    env_steps: int | None
    run_dir: str | None


def run_population(
    cfg: ExperimentConfig, out_dir: Path, resume: bool = False
) -> tuple[Path, list[MemberResult]]:
    """Train ``cfg``'s population (or continue the one in ``out_dir/cfg.name``); returns the
    experiment directory and each member's result."""
    if cfg.tune is None:
        raise UserError("this config has no tune: section (what to search; docs/TUNE.md)")
    try:
        import ray
        from ray import tune
    except ImportError as e:
        raise UserError(f"mtrl tune needs Ray Tune: pip install 'mtrl[tune]' ({e})") from None
    from mtrl.actors.ray_cluster import connect
    from mtrl.tune.schedulers import make_scheduler

    rule = get_plugins().algorithms.get(cfg.learner.algorithm)
    cfg, note = keep_replay(cfg, rule.has_replay)  # members keep their replay across restarts
    if note is not None:
        print(f"note: {note}", flush=True)

    session = connect(cfg.actors.ray)
    try:
        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        per_member = max(cpus / cfg.tune.population, 0.01)
        path = (out_dir / cfg.name).resolve()
        trainable = tune.with_resources(
            tune.with_parameters(
                train_member, base=cfg.model_dump(mode="json"), experiment=str(path)
            ),
            {"cpu": per_member},
        )
        if resume:
            if not tune.Tuner.can_restore(str(path)):
                raise UserError(f"{path}: no population to continue there")
            tuner = tune.Tuner.restore(str(path), trainable=trainable, resume_unfinished=True)
        else:
            if path.exists():
                raise UserError(f"{path} exists: continue it with --resume, or choose --dir")
            tuner = tune.Tuner(
                trainable,
                param_space=param_space(cfg.tune),
                tune_config=tune.TuneConfig(
                    scheduler=make_scheduler(cfg),
                    num_samples=cfg.tune.population,
                    reuse_actors=False,
                ),
                run_config=tune.RunConfig(
                    name=cfg.name,
                    storage_path=str(out_dir.resolve()),
                    stop={"env_steps": cfg.total_env_steps},
                    # Every member's checkpoints stay: a member that exploits another restores
                    # the one that member reported, which it may have moved past since.
                    checkpoint_config=tune.CheckpointConfig(num_to_keep=None),
                    # A failed member ends the population: PBT's members meet at each interval,
                    # so the others would wait for it forever (Tune pauses them, and its loop
                    # spins with nothing running).
                    failure_config=tune.FailureConfig(fail_fast=True),
                    verbose=1,
                ),
            )
        with without_restore_hint():  # mtrl's resume command is the one to use
            grid = tuner.fit()
    finally:
        session.close()
    members = [
        MemberResult(
            trial=r.path.rsplit("/", 1)[-1],
            hyperparameters=dict(r.config or {}),
            score=(r.metrics or {}).get("score"),
            env_steps=(r.metrics or {}).get("env_steps"),
            run_dir=(r.metrics or {}).get("run_dir"),
        )
        for r in grid
    ]
    errors = [r.error for r in grid if r.error is not None]
    if errors:
        raise RuntimeError(f"{len(errors)} member(s) failed; the first: {errors[0]}")
    _write_members(path / "members.csv", members)
    return path, members


def _write_members(path: Path, members: list[MemberResult]) -> None:
    keys = sorted({k for m in members for k in m.hyperparameters})
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["trial", *keys, "score", "env_steps", "run_dir"])
        for m in members:
            w.writerow(
                [
                    m.trial,
                    *(m.hyperparameters.get(k) for k in keys),
                    m.score,
                    m.env_steps,
                    m.run_dir,
                ]
            )
