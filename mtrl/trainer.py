"""The trainer: wiring of config → plugins → actors → learner → tracking (serial mode).

Every task's batch env is stepped in this process with batched inference (one forward per task
per step for all its copies); unroll blocks are gathered until ``learner.batch_size`` env
columns are available, then the learner takes one update over the mixed batch.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtrl.actors.inference import make_policy
from mtrl.actors.runner import TaskRunner
from mtrl.actors.transfer import to_task_batch
from mtrl.actors.unroll import UnrollBuffer
from mtrl.config import ExperimentConfig
from mtrl.errors import EnvKwargsError
from mtrl.learner.learner import Learner, resolve_device
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import EnvSpec, Plugins, get_plugins
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
        self.runners: list[TaskRunner] = []
        try:
            for i, (task, spec) in enumerate(zip(cfg.tasks, self.specs, strict=True)):
                try:
                    env = spec.build(task.num_envs, cfg.task_seed(i), **task.env_kwargs)
                except EnvKwargsError as e:
                    raise EnvKwargsError(f"tasks[{i}].env_kwargs: {e}") from e
                self.runners.append(
                    TaskRunner(i, env, cfg.learner.unroll_length, task.reward_scale)
                )
        except BaseException:
            self.close()
            raise
        spaces = [
            TaskSpaces(r.env.single_observation_space, r.env.single_action_space)
            for r in self.runners
        ]
        self.model = MultiTaskModel(spaces, cfg.learner.model).to(device)
        self.learner = Learner(self.model, cfg.learner, self.names)
        self.policy = make_policy(self.model, [s.action_space for s in spaces])
        self.recent = [deque(maxlen=RECENT_EPISODES) for _ in self.runners]
        self.episodes = [0] * len(self.runners)
        self.run_dir: Path | None = None
        self.sinks: list[Any] = []
        if write_run_dir:
            self.run_dir = create_run_dir(
                cfg.tracking.run_dir, cfg.name, cfg.seed, cfg.model_dump(mode="json")
            )
            self.sinks.append(JsonlSink(self.run_dir / "metrics.jsonl"))
        if console and cfg.tracking.console != "quiet":
            self.sinks.append(ConsoleSink(self.names))

    @property
    def env_steps(self) -> int:
        return sum(r.env_steps for r in self.runners)

    def run(self) -> TrainResult:
        cfg = self.cfg
        start = last_log = time.perf_counter()
        steps_at_log, updates = 0, 0
        pending: list[UnrollBuffer] = []
        columns = 0
        metrics: dict[str, float] = {}
        device = self.learner.device
        while self.env_steps < cfg.total_env_steps:
            for runner in self.runners:
                unroll = runner.collect(self.policy, self.learner.version)
                pending.append(unroll)
                columns += unroll.num_envs
            if columns >= cfg.learner.batch_size:
                metrics = self.learner.update([to_task_batch(u, device) for u in pending])
                pending, columns = [], 0
                updates += 1
            self._drain_episodes()
            if cfg.stop_at_target and self._targets_reached():
                break
            now = time.perf_counter()
            if now - last_log >= cfg.tracking.log_every_s:
                sps = (self.env_steps - steps_at_log) / (now - last_log)
                self._log(metrics, sps, updates, now - start)
                last_log, steps_at_log = now, self.env_steps
        seconds = time.perf_counter() - start
        self._log(metrics, self.env_steps / max(seconds, 1e-9), updates, seconds)
        return TrainResult(self.run_dir, self.env_steps, updates, seconds, self.results())

    def _drain_episodes(self) -> None:
        for i, runner in enumerate(self.runners):
            returns, _ = runner.episodes.drain()
            self.recent[i].extend(returns)
            self.episodes[i] += len(returns)

    def _targets_reached(self) -> bool:
        targeted = [(i, r) for i, r in enumerate(self.results()) if r.target_score is not None]
        return bool(targeted) and all(
            r.solved and self.episodes[i] >= RECENT_EPISODES for i, r in targeted
        )

    def results(self) -> list[TaskResult]:
        out = []
        for i, (task, spec, runner) in enumerate(
            zip(self.cfg.tasks, self.specs, self.runners, strict=True)
        ):
            mean = float(np.mean(self.recent[i])) if self.recent[i] else None
            out.append(
                TaskResult(
                    name=self.names[i],
                    env_steps=runner.env_steps,
                    episodes=self.episodes[i],
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
        for r in self.results():
            record[f"task/{r.name}/env_steps"] = r.env_steps
            record[f"task/{r.name}/episodes"] = r.episodes
            if r.mean_return is not None:
                record[f"task/{r.name}/return"] = r.mean_return
            if r.normalized_score is not None:
                record[f"task/{r.name}/normalized_score"] = r.normalized_score
        for sink in self.sinks:
            sink.write(record)

    def close(self) -> None:
        for r in self.runners:
            r.close()
        for s in getattr(self, "sinks", []):
            s.close()
