"""The trainer: wiring of config → plugins → scheduler → actor pool → learner → tracking.

The loop is the same in every actor mode (see :mod:`mtrl.actors.pool`): take the unrolls that
are ready, and once they hold ``learner.batch_size`` env columns run one update over the mixed
batch, give the unroll slots back and publish the new weights with their version. On a timer
the scheduler re-decides actors per task, metrics go to the trackers and a checkpoint is
written; :meth:`Trainer.resume` continues a run from its newest good checkpoint.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtrl.actors.factory import make_pool
from mtrl.actors.pool import TaskSetup
from mtrl.actors.pool_protocol import ActorPool, ClusterPool
from mtrl.actors.protocol import UnrollInfo
from mtrl.actors.ray_cluster import RaySession, connect
from mtrl.actors.serial_pool import SerialEnvError
from mtrl.actors.server import ReadyUnroll
from mtrl.algorithms import make_learner
from mtrl.anakin import AnakinRunner
from mtrl.config import ExperimentConfig
from mtrl.errors import UserError
from mtrl.learner.batch import TaskBatch
from mtrl.learner.distributed import DistContext
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import BatchEnv, EnvSpec, Plugins, get_plugins
from mtrl.plugins.external import sim_logs
from mtrl.scheduler import Rebalancer
from mtrl.sync.loose_sync import make_loose_sync
from mtrl.tracking.factory import make_sinks, tracker_factories
from mtrl.tracking.run_dir import create_run_dir
from mtrl.train import env_failures, run_state
from mtrl.train.allocation import apply_initial, explain_no_steps, observe_faults, rebalance
from mtrl.train.checkpointing import Checkpoints, DiskStop
from mtrl.train.final_eval import FinalEval, final_eval
from mtrl.train.liveness import Liveness
from mtrl.train.preflight import check_memory
from mtrl.train.progress import (
    RECENT_EPISODES,
    TaskProgress,
    TaskResult,
    TrainResult,
    task_metrics,
    task_results,
)
from mtrl.train.replica_decisions import ReplicaDecisions
from mtrl.train.shard_feed import ShardFeed, learner_inputs
from mtrl.train.shard_memory import check_shard_memory
from mtrl.train.task_envs import build_tasks, check_commands
from mtrl.train.unroll_intake import UnrollIntake
from mtrl.train.unroll_queue import UnrollQueue


class Trainer:
    """Builds everything a config names and trains until ``total_env_steps``."""

    def __init__(
        self,
        cfg: ExperimentConfig,
        plugins: Plugins | None = None,
        *,
        write_run_dir: bool = True,
        console: bool = True,
        run_dir: Path | None = None,
        seed_offset: int = 0,
    ) -> None:
        """``run_dir`` reuses an existing run directory (resume); ``seed_offset`` shifts the
        env seeds so a resumed run does not replay the trajectories it already learned from."""
        self.cfg = cfg
        plugins = plugins or get_plugins()
        self.specs: list[EnvSpec] = [plugins.env_spec(t.env) for t in cfg.tasks]
        self.names = [t.key for t in cfg.tasks]
        torch.set_num_threads(cfg.learner.torch_threads)
        trackers = tracker_factories(cfg, plugins)  # a bad tracker name fails before any work
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed)
        # Learner replicas (torchrun): each runs its own actors; only rank 0 logs and saves.
        self.ctx = DistContext.from_env()
        device = self.ctx.device(cfg.learner.device)
        check_commands(cfg, self.specs)  # a missing program, an unknown env_kwargs key
        check_memory(cfg, self.specs, device, algorithms=plugins.algorithms)  # a clear refusal
        self.ctx.init(device)
        if not self.ctx.is_main:
            write_run_dir, console = False, False
        seed_offset += 7919 * self.ctx.rank * max(t.num_envs for t in cfg.tasks)
        self.pool: ActorPool | None = None
        self.tracker: Any = None
        self.ray_session: RaySession | None = None  # joined here for sharded replay
        self.shard_feed = ShardFeed(None, None)  # until the pool is made
        sc = cfg.scheduler
        self.queue = UnrollQueue(
            len(cfg.tasks),
            sc.max_hold_s,
            weights=[t.weight for t in cfg.tasks],
            hold=sc.share_gate,
            max_loss_weight=sc.max_loss_weight if sc.loss_weights else None,
        )
        self._capped_said: set[int] = set()
        self.liveness = Liveness(
            self.queue, cfg.learner.batch_size, self.names, cfg.tracking.stall_warning_s
        )
        envs: list[BatchEnv | None] = []  # built here: serial-mode and Anakin tasks
        self.anakin: list[AnakinRunner] = []
        self.run_dir: Path | None = run_dir if self.ctx.is_main else None  # rank 0 writes
        if run_dir is None and write_run_dir:
            self.run_dir = create_run_dir(
                cfg.tracking.run_dir, cfg.name, cfg.seed, cfg.model_dump(mode="json")
            )
        # before any env is built: the simulations launched from here on log into the run dir
        sim_logs.use_dir(self.run_dir / "sim-logs" if self.run_dir is not None else None)
        try:
            if cfg.replay.shards is not None and cfg.actors.mode == "ray":
                # The learner's replay shards start with the learner: join the cluster first,
                # and check that each node's shards fit its memory.
                self.ray_session = connect(cfg.actors.ray)
                check_shard_memory(cfg, self.specs, plugins.algorithms)
            setups, built = build_tasks(cfg, self.specs, seed_offset, device)
            envs.extend(built)
            spaces = [TaskSpaces(s.observation_space, s.action_space) for s in setups]
            model = MultiTaskModel(spaces, cfg.learner.model)
            self.learner = make_learner(
                plugins,
                model,
                cfg.learner,
                self.names,
                self.ctx,
                device,
                lr_scales=[t.learning_rate_scale for t in cfg.tasks],
            )
            self.model = self.learner.model
            sync = make_loose_sync(cfg.learner.parallel, self.ctx, self.learner)
            self.sync = sync
            self.decisions = ReplicaDecisions(self.ctx, sync, cfg.total_env_steps)
            unroll = cfg.learner.unroll_length
            local = set(self.learner.local_tasks)  # all, unless tasks are sharded over ranks
            actor_tasks: list[TaskSetup | None] = [
                s if i in local and not cfg.tasks[i].anakin else None for i, s in enumerate(setups)
            ]
            # The budget is shared by the tasks whose actors this process runs.
            local_actor_tasks = [i for i, s in enumerate(actor_tasks) if s is not None]
            self.rebalancer = Rebalancer(cfg, plugins, local_actor_tasks)
            for i, env in enumerate(envs):
                if env is None:
                    continue
                if cfg.tasks[i].anakin and i in local:
                    task = cfg.tasks[i]
                    self.anakin.append(AnakinRunner(i, env, unroll, task.reward_scale))
                elif actor_tasks[i] is None:
                    env.close()
                    envs[i] = None
            pool = self.pool = make_pool(cfg, actor_tasks, envs, self.model)
            # Before the first actor starts: where Ray actors store their unrolls.
            self.shard_feed = ShardFeed(self.learner, pool, self._take_in_ready)
            apply_initial(pool, self.rebalancer, self.queue)
            # Last: a tracker that cannot start (TensorBoard asked for, not installed) stops
            # the run here, and the envs, actors and run directory above are let go.
            self.tracker = make_sinks(
                cfg,
                self.run_dir,
                self.names,
                trackers if self.ctx.is_main else [],  # replicas log nothing (rank 0 does)
                console=None if console else "quiet",
            )
        except BaseException as e:
            for env in envs:
                if env is not None:
                    env.close()
            self.close()
            leaving = self.run_dir if run_dir is None else None  # made here: it goes
            said = env_failures.start_failure(e, leaving)  # (its simulation logs kept)
            if leaving is not None:  # nothing half-made is left
                shutil.rmtree(leaving, ignore_errors=True)
                with contextlib.suppress(OSError):  # the runs folder too, if now empty
                    leaving.parent.rmdir()
            if said is not None:  # a simulation that cannot start: one line, no traceback
                raise said from e
            raise
        self.progress = [TaskProgress() for _ in cfg.tasks]
        self.intake = UnrollIntake(
            self.names, self.progress, self.rebalancer, self.liveness, self.tracker
        )
        self.total_env_steps = 0  # over all replicas (this process's own when alone)
        self._stop = False
        self.updates = 0
        self.elapsed_before = 0.0  # wall seconds of earlier sessions of a resumed run
        self.checkpoints = Checkpoints(cfg.checkpoint, self.run_dir)

    @property
    def env_steps(self) -> int:
        """Env steps of this process's tasks (this replica's, in a torchrun job)."""
        return sum(p.env_steps for p in self.progress)

    @property
    def run_env_steps(self) -> int:
        """Env steps of the whole run: over all replicas, as of their last joint decision."""
        return max(self.total_env_steps, self.env_steps)

    def run(self) -> TrainResult:
        cfg, ck = self.cfg, self.cfg.checkpoint
        start = last_log = last_ckpt_t = time.perf_counter()
        self.intake.zero_s = start - self.elapsed_before  # clock time at charts/elapsed_s = 0
        steps_at_log, last_ckpt_steps = self.env_steps, self.run_env_steps
        start_steps = self.run_env_steps  # a resumed run's earlier sessions: not this rate's
        metrics: dict[str, float] = {}
        self._stop = False
        self.liveness.stall.updated(time.monotonic())
        done = False
        on_device: list[TaskBatch] = []  # Anakin batches
        device_columns = 0
        queue = self.queue
        while not done:
            # Anakin tasks always have work: never block on the actors then.
            for ru in self._get(0.0 if self.anakin else queue.wait_s(), start):
                self._accept(ru)
                queue.add(ru)
            for runner in self.anakin:
                on_device.append(runner.collect(self.model, self.learner.version))
                self.progress[runner.task].env_steps += runner.unroll_length * runner.env.num_envs
                device_columns += runner.env.num_envs
            self._observe_faults(start)
            need = cfg.learner.batch_size - device_columns
            take = self.liveness.take(self.pool, need)
            if take is not None:
                metrics = self._learn(take, on_device)
                on_device, device_columns = [], 0
                self.intake.anakin_episodes(self.anakin)
                self.liveness.stall.updated(time.monotonic())
            else:
                self.liveness.report_stall(self.pool, need)
            now = time.perf_counter()
            due = self.run_dir is not None and self.checkpoints.due(
                self.run_env_steps - last_ckpt_steps, now - last_ckpt_t
            )
            done, save = self._done(due)
            rebalance(self.pool, self.rebalancer, self.queue, self.names)
            if now - last_log >= cfg.tracking.log_every_s:
                sps = (self.env_steps - steps_at_log) / (now - last_log)
                self._log(metrics, sps, now - start)
                last_log, steps_at_log = now, self.env_steps
            if save:
                self.save_checkpoint(now - start)
                last_ckpt_t, last_ckpt_steps = now, self.run_env_steps
                if self.checkpoints.stopping:  # on_disk_error: stop (all replicas together)
                    self.request_stop()
        for ru in queue.drain():
            self.pool.release(ru)
        self.decisions.finish(self.env_steps)  # loosely synced replicas end with one model
        seconds = time.perf_counter() - start
        if ck.enabled and (self.run_dir is not None or self.ctx.distributed):
            self.save_checkpoint(seconds)  # every replica: a sharded learner's state is gathered
        final = self.run_final_eval(metrics)  # rank 0, after the save: eval/<task>/greedy_return
        self._log(metrics, (self.env_steps - steps_at_log) / max(now - last_log, 1e-9), seconds)
        steps = self.run_env_steps
        results = explain_no_steps(self.pool, final.apply(self.results()))
        # A later run() of this trainer (a population member's next interval) continues the
        # clock, as a resumed run does.
        self.elapsed_before += seconds
        result = TrainResult(
            self.run_dir, steps, self.updates, seconds, results, final.episodes, start_steps
        )
        if self.checkpoints.stopping:
            raise DiskStop(self.checkpoints.stop_message(), result)
        if (warning := self.checkpoints.final_warning()) is not None:
            print(warning, flush=True)
        return result

    def _get(self, timeout: float, start: float) -> list[ReadyUnroll]:
        """The actors' ready unrolls. An env that failed under serial actors (which cannot
        restart it) ends the run here: a checkpoint of what was done, then one line that says
        why and how to resume (:func:`~mtrl.train.env_failures.serial_crash_error`)."""
        try:
            return self.pool.get(timeout=timeout)
        except SerialEnvError as e:
            saved, ck = None, self.cfg.checkpoint
            if ck.enabled and self.run_dir is not None and not self.ctx.distributed:
                saved = self.save_checkpoint(time.perf_counter() - start)
            raise env_failures.serial_crash_error(e.name, e.cause, self.run_dir, saved) from e

    def _observe_faults(self, start: float) -> None:
        """The pool's faults to the scheduler. Once every task is quarantined the run ends:
        a checkpoint of what was done (when anything was), then the one-line error and how to
        resume (:func:`~mtrl.train.env_failures.with_checkpoint`)."""
        try:
            observe_faults(self.pool, self.rebalancer, self.names)
        except UserError as e:
            saved, ck = None, self.cfg.checkpoint
            done = any(p.env_steps for p in self.progress)
            if done and ck.enabled and self.run_dir is not None and not self.ctx.distributed:
                saved = self.save_checkpoint(time.perf_counter() - start)
            raise env_failures.with_checkpoint(e, self.run_dir, saved) from e

    def run_final_eval(self, record: dict[str, float]) -> FinalEval:
        """The greedy evaluation at the end of :meth:`run` (``tracking.final_eval_episodes``),
        its figures added to ``record``; subclasses skip it where a run goes on."""
        return final_eval(
            self.cfg,
            self.model,
            self.specs,
            self.names,
            self.pool.faults,
            record,
            self.ctx,
            env_steps=[p.env_steps for p in self.progress],
        )

    def _done(self, checkpoint_due: bool = False) -> tuple[bool, bool]:
        """(stop, save a checkpoint now): replicas decide both together where they meet
        (:mod:`mtrl.train.replica_decisions`), so none leaves while the others wait in a
        collective, and all take part in a checkpoint."""
        targets = self.cfg.stop_at_target and self._targets_reached()
        decided = self.decisions.decide(self.env_steps, self._stop, targets, checkpoint_due)
        self.total_env_steps = self.decisions.run_steps(self.env_steps)
        return decided

    def request_stop(self) -> None:
        """Finish the current round and return from :meth:`run` (signal handlers, benchmarks)."""
        self._stop = True

    def _accept(self, ru: ReadyUnroll) -> None:
        """Count an actor's unroll (:mod:`mtrl.train.unroll_intake`), then :meth:`on_unroll`."""
        self.intake.accept(ru)
        self.on_unroll(ru.task, ru.info)

    def _take_in_ready(self) -> None:
        """The actors' finished unrolls counted and queued for the next update, without
        waiting: called while the learner waits for the actors' inserts (``rate_limit.waits:
        learner``), so that they get their next unrolls to do meanwhile."""
        assert self.pool is not None
        for ru in self.pool.get(timeout=0.0):
            self._accept(ru)
            self.queue.add(ru)

    def on_unroll(self, task: int, info: UnrollInfo) -> None:
        """Called after each actor unroll of ``task`` is counted in :attr:`progress` (before
        the learner uses it). A no-op: subclasses override it to watch a run (benchmarks note
        when a task reaches its target; :meth:`request_stop` from here ends the run)."""

    def _learn(self, pending: list[ReadyUnroll], on_device: list[TaskBatch]) -> dict[str, float]:
        device = self.learner.device
        lag_max = max(
            (self.learner.version - ru.buffer.policy_version for ru in pending), default=0
        )
        batches = [*learner_inputs(pending, device), *on_device]
        copied = device.type != "cpu"  # on the CPU the batch is a view of the unroll slots
        if copied:
            for ru in pending:
                self.pool.release(ru)
        # Replicas agree on the steps of their last joint decision: their step sizes match.
        steps = self.decisions.run_steps(self.env_steps)
        self.learner.set_progress(min(steps / self.cfg.total_env_steps, 1.0))
        self.queue.weigh(batches)
        metrics = self.learner.update(batches)
        self.decisions.after_update(self.env_steps)  # a sync of the replicas when one is due
        if self.sync is not None:
            metrics.update(self.sync.metrics())
        self.updates += 1
        for b in batches:
            self.progress[b.task].samples += b.num_samples
            self.rebalancer.observe_delivered(b.task, b.num_samples)
        self.queue.delivered([(b.task, b.num_steps) for b in batches])
        if not copied:
            for ru in pending:
                self.pool.release(ru)
        self.pool.publish(self.model, self.learner.version)
        self.shard_feed.refresh()  # a shard started again: the actors learn its new handle
        metrics["charts/policy_lag_max"] = float(lag_max)
        return metrics

    def _targets_reached(self) -> bool:
        targeted = [(i, r) for i, r in enumerate(self.results()) if r.target_score is not None]
        return bool(targeted) and all(
            r.solved and self.progress[i].episodes >= RECENT_EPISODES for i, r in targeted
        )

    def results(self) -> list[TaskResult]:
        faults = getattr(self.pool, "faults", None)
        return task_results(self.cfg.tasks, self.specs, self.progress, faults)

    def _log(self, metrics: dict[str, float], sps: float, elapsed: float) -> None:
        record: dict[str, Any] = {
            "charts/env_steps": self.run_env_steps,
            "charts/sps": sps,
            "charts/updates": self.updates,
            "charts/elapsed_s": self.elapsed_before + elapsed,
            **metrics,
            **self.learner.pop_diagnostics(),  # per-task means since the last record
        }
        record.update(self.queue.share_metrics(self.names))
        for i in set(self.queue.capped()) - self._capped_said:
            self._capped_said.add(i)
            print(f"WARNING: {self.queue.capped_message(i, self.names[i])}")
        faults = [f.as_metrics() for f in self.pool.faults]
        if isinstance(self.pool, ClusterPool):  # Ray: actors per node
            record.update(self.pool.metrics())
        record.update(
            task_metrics(self.results(), self.progress, faults, self.pool.actors_per_task())
        )
        self.tracker.write(record)

    # -- checkpoints (the state itself: mtrl/train/run_state.py) ------------------------------
    def state_dict(self, elapsed: float) -> dict[str, Any]:
        """Everything a resumed run needs, as plain data (loads with ``weights_only``)."""
        return run_state.capture(self, elapsed)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s output (the pool's weights are republished)."""
        run_state.restore(self, state)

    def save_checkpoint(self, elapsed: float) -> Path | None:
        """Write a checkpoint into the run directory (rank 0; the path, or None when the
        disk failed it: :mod:`mtrl.train.checkpointing`). In a torchrun job every replica calls
        it, since a sharded learner's state is gathered from all."""
        return self.checkpoints.write(lambda: self.state_dict(elapsed), self.run_env_steps)

    @classmethod
    def resume(
        cls,
        run_dir: Path,
        plugins: Plugins | None = None,
        *,
        console: bool = True,
        total_env_steps: int | None = None,
    ) -> Trainer:
        """A trainer that continues ``run_dir`` from its newest loadable checkpoint; what the
        run logged past that checkpoint is cut from its metric files first."""
        plugins = plugins or get_plugins()
        saved = run_state.load_for_resume(Path(run_dir), plugins, total_env_steps)
        if DistContext.from_env().is_main:  # before the sinks open them (rank 0 writes them)
            saved.trim_run_files(Path(run_dir))
        trainer = cls(
            saved.config,
            plugins,
            console=console,
            run_dir=Path(run_dir),
            seed_offset=saved.seed_offset,
        )
        try:
            trainer.load_state_dict(saved.state)
        except BaseException:
            trainer.close()
            raise
        print(f"resumed {run_dir} from {saved.path.name} at {trainer.env_steps:,} env steps")
        return trainer

    def close(self, keep_process_group: bool = False) -> None:
        """Stop the actors, flush the trackers and leave the process group (unless
        ``keep_process_group``: the caller then ends the process with
        :meth:`DistContext.exit_process`)."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        if getattr(self, "ray_session", None) is not None:
            self.ray_session.close()  # the replay shards go with it
            self.ray_session = None
        for runner in getattr(self, "anakin", []):
            runner.close()
        self.anakin = []
        if self.tracker is not None:
            self.tracker.close()
            self.tracker = None
        if getattr(self, "sync", None) is not None:
            self.sync.close()  # the gossip's sockets
        if getattr(self, "ctx", None) is not None:
            if not keep_process_group:
                self.ctx.destroy(wait_for_peers=sys.exc_info()[0] is None)
            self.ctx = None
