"""The trainer: wiring of config → plugins → actor pool → learner → tracking.

The loop is the same in every actor mode (see :mod:`mtrl.actors.pool`): take the unrolls that
are ready, and once they hold ``learner.batch_size`` env columns run one update over the mixed
batch, give the unroll slots back and publish the new weights with their version.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from mtrl.actors.inference import InferenceModel
from mtrl.actors.pool import FaultPolicy, ParallelPool, SerialPool, TaskSetup
from mtrl.actors.server import ReadyUnroll
from mtrl.actors.transfer import to_task_batch
from mtrl.config import ExperimentConfig
from mtrl.errors import EnvKwargsError, UserError
from mtrl.learner.learner import Learner, resolve_device
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import BatchEnv, EnvSpec, Plugins, get_plugins
from mtrl.tracking.run_dir import create_run_dir
from mtrl.tracking.sinks import ConsoleSink, JsonlSink

RECENT_EPISODES = 20


@dataclass
class TaskResult:
    """How one task ended: recent mean return (unscaled) and normalised score."""

    name: str
    env_steps: int
    episodes: int
    mean_return: float | None
    normalized_score: float | None
    target_score: float | None

    @property
    def solved(self) -> bool | None:
        if self.target_score is None or self.mean_return is None:
            return None
        return self.mean_return >= self.target_score


@dataclass
class TrainResult:
    run_dir: Path | None
    env_steps: int
    updates: int
    seconds: float
    tasks: list[TaskResult] = field(default_factory=list)


@dataclass
class TaskProgress:
    """Running counters of one task, fed by the unrolls that reach the trainer."""

    env_steps: int = 0
    episodes: int = 0
    returns: deque = field(default_factory=lambda: deque(maxlen=RECENT_EPISODES))
    lengths: deque = field(default_factory=lambda: deque(maxlen=RECENT_EPISODES))
    env_seconds: float = 0.0  # inside env.step, summed over actors
    samples: int = 0  # env steps delivered to the learner


def _build_env(spec: EnvSpec, cfg: ExperimentConfig, i: int, num_envs: int) -> BatchEnv:
    task = cfg.tasks[i]
    try:
        return spec.build(num_envs, cfg.task_seed(i), **task.env_kwargs)
    except EnvKwargsError as e:
        raise EnvKwargsError(f"tasks[{i}].env_kwargs: {e}") from e


def initial_actors(cfg: ExperimentConfig) -> list[int]:
    """Actors per task at start: ``scheduler.num_actors`` split by task weight (largest
    remainder), at least ``max(1, min_actors_per_task)`` each."""
    sc, weights = cfg.scheduler, np.array([t.weight for t in cfg.tasks], float)
    floor = max(1, sc.min_actors_per_task)
    total = max(sc.num_actors, floor * len(weights))
    extra = total - floor * len(weights)
    share = weights / weights.sum() * extra
    counts = np.floor(share).astype(int)
    for i in np.argsort(-(share - counts), kind="stable")[: extra - counts.sum()]:
        counts[i] += 1
    return (counts + floor).tolist()


class Trainer:
    """Builds everything a config names and trains until ``total_env_steps``."""

    def __init__(
        self,
        cfg: ExperimentConfig,
        plugins: Plugins | None = None,
        *,
        write_run_dir: bool = True,
        console: bool = True,
    ) -> None:
        self.cfg = cfg
        plugins = plugins or get_plugins()
        self.specs: list[EnvSpec] = [plugins.envs.get(t.env) for t in cfg.tasks]
        self.names = [t.key for t in cfg.tasks]
        torch.set_num_threads(cfg.learner.torch_threads)
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed)
        device = resolve_device(cfg.learner.device)
        self.pool: Any = None
        self.sinks: list[Any] = []
        serial = cfg.actors.mode == "serial"
        envs: list[BatchEnv] = []
        try:
            setups = []
            for i, (task, spec) in enumerate(zip(cfg.tasks, self.specs, strict=True)):
                obs_space, act_space = self._spaces(spec, i, envs if serial else None)
                setups.append(
                    TaskSetup(
                        index=i,
                        name=task.key,
                        env_id=task.env,
                        num_envs=task.num_envs,
                        seed=cfg.task_seed(i),
                        reward_scale=task.reward_scale,
                        observation_space=obs_space,
                        action_space=act_space,
                        env_kwargs=dict(task.env_kwargs),
                    )
                )
            spaces = [TaskSpaces(s.observation_space, s.action_space) for s in setups]
            self.model = MultiTaskModel(spaces, cfg.learner.model).to(device)
            self.learner = Learner(self.model, cfg.learner, self.names)
            unroll = cfg.learner.unroll_length
            if serial:
                inference = InferenceModel(self.model, shared=True)
                self.pool = SerialPool(setups, envs, unroll, inference)
            else:
                sc = cfg.scheduler
                self.pool = ParallelPool(
                    setups,
                    unroll,
                    InferenceModel(self.model),
                    mode=cfg.actors.mode,
                    num_slots=cfg.actors.slots_per_actor,
                    start_method=cfg.actors.start_method,
                    faults=FaultPolicy(
                        max_restarts=sc.max_restarts, step_timeout_s=sc.step_timeout_s
                    ),
                )
                self.pool.set_actors(initial_actors(cfg))
        except BaseException:
            for env in envs:
                env.close()
            self.close()
            raise
        self.progress = [TaskProgress() for _ in cfg.tasks]
        self._stop = False
        self.run_dir: Path | None = None
        if write_run_dir:
            self.run_dir = create_run_dir(
                cfg.tracking.run_dir, cfg.name, cfg.seed, cfg.model_dump(mode="json")
            )
            self.sinks.append(JsonlSink(self.run_dir / "metrics.jsonl"))
        if console and cfg.tracking.console != "quiet":
            self.sinks.append(ConsoleSink(self.names))

    def _spaces(
        self, spec: EnvSpec, i: int, keep: list[BatchEnv] | None
    ) -> tuple[gym.Space, gym.Space]:
        """A task's spaces. Serial mode builds (and keeps) the env; parallel mode asks the spec,
        building one copy here only when kwargs may change the spaces."""
        task = self.cfg.tasks[i]
        if keep is not None:
            env = _build_env(spec, self.cfg, i, task.num_envs)
            keep.append(env)
            return env.single_observation_space, env.single_action_space
        if not task.env_kwargs:
            return spec.observation_space, spec.action_space
        env = _build_env(spec, self.cfg, i, 1)
        try:
            return env.single_observation_space, env.single_action_space
        finally:
            env.close()

    @property
    def env_steps(self) -> int:
        return sum(p.env_steps for p in self.progress)

    def run(self) -> TrainResult:
        cfg = self.cfg
        start = last_log = time.perf_counter()
        steps_at_log, updates = 0, 0
        pending: list[ReadyUnroll] = []
        columns = 0
        metrics: dict[str, float] = {}
        self._stop = False
        while self.env_steps < cfg.total_env_steps and not self._stop:
            for ru in self.pool.get(timeout=1.0):
                self._accept(ru)
                pending.append(ru)
                columns += ru.buffer.num_envs
            self._check_faults()
            if columns >= cfg.learner.batch_size:
                metrics = self._learn(pending)
                pending, columns = [], 0
                updates += 1
            if cfg.stop_at_target and self._targets_reached():
                break
            now = time.perf_counter()
            if now - last_log >= cfg.tracking.log_every_s:
                sps = (self.env_steps - steps_at_log) / (now - last_log)
                self._log(metrics, sps, updates, now - start)
                last_log, steps_at_log = now, self.env_steps
        for ru in pending:
            self.pool.release(ru)
        seconds = time.perf_counter() - start
        self._log(metrics, self.env_steps / max(seconds, 1e-9), updates, seconds)
        return TrainResult(self.run_dir, self.env_steps, updates, seconds, self.results())

    def request_stop(self) -> None:
        """Finish the current round and return from :meth:`run` (signal handlers, benchmarks)."""
        self._stop = True

    def _accept(self, ru: ReadyUnroll) -> None:
        p, info = self.progress[ru.task], ru.info
        p.env_steps += info.env_steps
        p.env_seconds += info.env_seconds
        p.episodes += len(info.episode_returns)
        p.returns.extend(info.episode_returns)
        p.lengths.extend(info.episode_lengths)

    def _learn(self, pending: list[ReadyUnroll]) -> dict[str, float]:
        device = self.learner.device
        lag_max = max(self.learner.version - ru.buffer.policy_version for ru in pending)
        batches = [to_task_batch(ru.buffer, device) for ru in pending]
        copied = device.type != "cpu"  # on the CPU the batch is a view of the unroll slots
        if copied:
            for ru in pending:
                self.pool.release(ru)
        metrics = self.learner.update(batches)
        for b in batches:
            self.progress[b.task].samples += b.num_samples
        if not copied:
            for ru in pending:
                self.pool.release(ru)
        self.pool.publish(self.model, self.learner.version)
        metrics["charts/policy_lag_max"] = float(lag_max)
        return metrics

    def _check_faults(self) -> None:
        for ev in self.pool.events():
            name = self.names[ev.task]
            print(f"actor {ev.actor_id} of task {name!r} failed ({ev.kind}): {ev.text}")
        faults = self.pool.faults
        if all(f.quarantined for f in faults):
            raise UserError(
                "every task is quarantined after repeated actor failures: "
                + "; ".join(f"{n}: {f.last_error}" for n, f in zip(self.names, faults, strict=True))
            )

    def _targets_reached(self) -> bool:
        targeted = [(i, r) for i, r in enumerate(self.results()) if r.target_score is not None]
        return bool(targeted) and all(
            r.solved and self.progress[i].episodes >= RECENT_EPISODES for i, r in targeted
        )

    def results(self) -> list[TaskResult]:
        out = []
        for task, spec, p in zip(self.cfg.tasks, self.specs, self.progress, strict=True):
            mean = float(np.mean(p.returns)) if p.returns else None
            out.append(
                TaskResult(
                    name=task.key,
                    env_steps=p.env_steps,
                    episodes=p.episodes,
                    mean_return=mean,
                    normalized_score=spec.normalized_score(mean) if mean is not None else None,
                    target_score=task.target_score,
                )
            )
        return out

    def _log(self, metrics: dict[str, float], sps: float, updates: int, elapsed: float) -> None:
        record: dict[str, Any] = {
            "charts/env_steps": self.env_steps,
            "charts/sps": sps,
            "charts/updates": updates,
            "charts/elapsed_s": elapsed,
            **metrics,
        }
        actors = self.pool.actors_per_task()
        for i, r in enumerate(self.results()):
            p, f = self.progress[i], self.pool.faults[i]
            record[f"task/{r.name}/env_steps"] = r.env_steps
            record[f"task/{r.name}/episodes"] = r.episodes
            record[f"task/{r.name}/faults"] = f.faults
            record[f"scheduler/{r.name}/actors"] = actors[i]
            if p.env_seconds > 0:
                record[f"task/{r.name}/env_sps"] = p.env_steps / p.env_seconds
            if r.mean_return is not None:
                record[f"task/{r.name}/return"] = r.mean_return
                record[f"task/{r.name}/episode_length"] = float(np.mean(p.lengths))
            if r.normalized_score is not None:
                record[f"task/{r.name}/normalized_score"] = r.normalized_score
        for sink in self.sinks:
            sink.write(record)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        for s in self.sinks:
            s.close()
        self.sinks = []
