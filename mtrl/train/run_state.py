"""What a checkpoint of a training run holds, and how a run continues from one.

:func:`capture` turns a trainer into plain data (model, optimiser, PopArt statistics, per-task
counters, actors per task, RNG states, the config) that loads with
``torch.load(weights_only=True)``; :func:`restore` puts it back. The trainer is anything shaped
like :class:`Resumable` (in practice :class:`mtrl.train.trainer.Trainer`, which imports this module,
never the other way round). Storage — atomic writes, keep-last-N, corrupt-file fallback — is
:mod:`mtrl.checkpoint`'s job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mtrl.actors.pool_protocol import ActorPool, ScalablePool
from mtrl.checkpoint import (
    NoCheckpointError,
    capture_rng_state,
    checkpoint_step,
    load_latest,
    restore_rng_state,
)
from mtrl.config import CheckpointConfig, ExperimentConfig, parse_config
from mtrl.errors import MtrlError
from mtrl.tracking.resume_trim import trim_to_checkpoint

if TYPE_CHECKING:
    import torch

    from mtrl.plugins import Plugins
    from mtrl.train.progress import TaskProgress


class Resumable(Protocol):
    """What :func:`capture` reads from and :func:`restore` writes into a trainer."""

    cfg: ExperimentConfig
    learner: Any
    """Has ``state_dict``/``load_state_dict`` and ``version``."""
    model: torch.nn.Module
    pool: ActorPool
    """Republished to after a restore; a :class:`ScalablePool` gets the saved actor counts."""
    updates: int
    elapsed_before: float
    progress: Sequence[TaskProgress]
    sync: Any
    """The replicas' loosened synchronisation (``state_dict``/``load_state_dict``), or None."""

    @property
    def env_steps(self) -> int: ...


class NothingToDo(MtrlError):
    """A resumed run already reached its ``total_env_steps``: nothing is trained or written
    (the CLI prints the message and exits 0)."""


def capture(trainer: Resumable, elapsed: float) -> dict[str, Any]:
    """The trainer's state after ``elapsed`` seconds of this session."""
    return {
        "config": trainer.cfg.model_dump(mode="json"),
        "learner": trainer.learner.state_dict(),
        "env_steps": trainer.env_steps,
        "updates": trainer.updates,
        "elapsed_s": trainer.elapsed_before + elapsed,
        "tasks": [
            {
                "env_steps": p.env_steps,
                "episodes": p.episodes,
                "returns": list(p.returns),
                "lengths": list(p.lengths),
                "successes": list(p.successes),
                "env_seconds": p.env_seconds,
                "samples": p.samples,
            }
            for p in trainer.progress
        ],
        "actors": trainer.pool.actors_per_task(),
        "rng": capture_rng_state(),
        "sync": None if trainer.sync is None else trainer.sync.state_dict(),
    }


def restore(trainer: Resumable, state: dict[str, Any]) -> None:
    """Load :func:`capture`'s output into a freshly built trainer of the same config."""
    trainer.learner.load_state_dict(state["learner"])
    trainer.pool.publish(trainer.model, trainer.learner.version)
    trainer.updates = int(state["updates"])
    trainer.elapsed_before = float(state["elapsed_s"])
    for p, t in zip(trainer.progress, state["tasks"], strict=True):
        p.env_steps, p.episodes = int(t["env_steps"]), int(t["episodes"])
        p.returns.extend(t["returns"])
        p.lengths.extend(t["lengths"])
        p.successes.extend(t.get("successes", []))  # checkpoints from before success counting
        p.env_seconds, p.samples = float(t["env_seconds"]), int(t["samples"])
    if trainer.sync is not None and state.get("sync") is not None:
        trainer.sync.load_state_dict(state["sync"])
    if isinstance(trainer.pool, ScalablePool) and state.get("actors"):
        trainer.pool.set_actors(list(state["actors"]))
    restore_rng_state(state["rng"])


@dataclass(frozen=True)
class SavedRun:
    """A run's newest loadable checkpoint, ready to build the trainer that continues it."""

    config: ExperimentConfig
    state: dict[str, Any]
    path: Path
    seed_offset: int
    """Shift of the env seeds: the envs' internal state is not in the checkpoint, so the
    resumed run starts fresh episodes rather than replaying the first session's."""
    run_steps: int = 0
    """The whole run's env steps at the checkpoint (all replicas')."""

    def trim_run_files(self, run_dir: Path) -> None:
        """Cut ``run_dir``'s metric files back to this checkpoint
        (:mod:`mtrl.tracking.resume_trim`): what a killed run logged past it is lived again."""
        tasks = self.state["tasks"]
        steps = {t.key: int(s["env_steps"]) for t, s in zip(self.config.tasks, tasks, strict=True)}
        trim_to_checkpoint(run_dir, self.run_steps, steps)


def load_for_resume(
    run_dir: Path, plugins: Plugins, total_env_steps: int | None = None
) -> SavedRun:
    """The newest good checkpoint of ``run_dir`` and its config, validated against the
    installed plugins (``total_env_steps`` overrides the saved budget).

    Raises :class:`NothingToDo` when the checkpoint is at or past the budget: resuming then
    would only rewrite the last checkpoint and log a 0 steps/s record.
    """
    import yaml

    try:
        state, path = load_latest(run_dir)
    except NoCheckpointError as e:
        raise NoCheckpointError(f"{e}: {_why_no_checkpoint(run_dir)}") from None
    data = dict(state["config"])
    if total_env_steps is not None:
        data["total_env_steps"] = total_env_steps
    cfg = parse_config(
        yaml.safe_dump(data, sort_keys=False),
        f"{path} (config)",
        **plugins.config_context(),
    )
    # The file name holds the whole run's steps (all replicas); the state, this rank's.
    done = max(int(state["env_steps"]), checkpoint_step(path) or 0)
    if done >= cfg.total_env_steps:
        raise NothingToDo(
            f"nothing to do: run already at {done:,} of {cfg.total_env_steps:,} env steps "
            "(raise --total-env-steps to continue)"
        )
    offset = 1_000_003 * (int(state["updates"]) + 1)
    return SavedRun(cfg, state, path, seed_offset=offset, run_steps=done)


def _why_no_checkpoint(run_dir: Path) -> str:
    """Why a run left no checkpoint, from its ``config.yaml``, and how to lose less next time."""
    import yaml

    try:
        saved = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
        ck = CheckpointConfig.model_validate(saved.get("checkpoint") or {})
    except Exception:  # no readable config: say what the defaults would have done
        ck = CheckpointConfig()
    if not ck.enabled:
        return "the run had checkpoints off (checkpoint.enabled: false); nothing to resume"
    when = [f"checkpoint.every_s: {ck.every_s:g} s"] if ck.every_s else []
    when += [f"checkpoint.every_env_steps: {ck.every_env_steps:,}"] if ck.every_env_steps else []
    if not when:
        return (
            "the run had no periodic checkpoints (checkpoint.every_s and every_env_steps: "
            "null), only one at its end; set checkpoint.every_s to resume a stopped run"
        )
    return (
        f"the run stopped before its first checkpoint (due after {' or '.join(when)}); "
        "start it again, with a shorter checkpoint.every_s in its config to lose less if it "
        "stops early again"
    )
