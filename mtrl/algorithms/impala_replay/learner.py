"""IMPALA with experience replay (``learner.algorithm: impala_replay``): LASER's mixing of
fresh and replayed unrolls (Schmitt et al. 2020, "Off-Policy Actor-Critic with Shared
Experience Replay"), on top of the IMPALA update as it is.

Each update:

1. every fresh unroll goes into its task's replay of whole sequences
   (:class:`~mtrl.replay.SequenceStorage`: one env copy's unroll each, with the actor's
   behaviour log-probabilities, policy versions and, for a recurrent core, its state at the
   start);
2. for a task's ``N`` fresh env columns, ``round(N x p / (1 - p))`` sequences of the same task
   are drawn uniformly from its replay (``p`` = ``learner.impala_replay.proportion``; its size
   is ``replay.capacity``), once it holds that many; they carry the fresh batch's loss
   weight, so the scheduler's shares and loss weights hold for the mixed batch as for the
   fresh one;
3. :class:`~mtrl.algorithms.impala.learner.ImpalaLearner` (or the parallel learner
   ``learner.parallel`` chooses) updates on fresh and replayed batches together. V-trace's
   truncated importance weights (``rho_bar``, ``c_bar``) correct both for the policy that
   acted, which for a replayed sequence may be many versions old; PopArt's statistics see
   both.

Each env step then enters about ``1 / (1 - p)`` updates instead of one. A recurrent core runs
from the state stored with the sequence (no burn-in: the state is the acting policy's own, of
its version). With ``checkpoint.replay`` the replay's contents go into checkpoints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from mtrl.algorithms.feed import batch_to_unroll
from mtrl.algorithms.impala.parallel import make_impala_learner
from mtrl.algorithms.impala_replay.memory import sequences
from mtrl.algorithms.impala_replay.settings import ImpalaReplaySettings
from mtrl.config import LearnerConfig
from mtrl.learner.batch import TaskBatch, task_batch
from mtrl.learner.distributed import DistContext
from mtrl.learner.protocol import Learner
from mtrl.replay import (
    ReplayEmptied,
    SequenceStorage,
    ShardedTaskReplay,
    TaskReplay,
    replay_metrics,
    task_replay,
)
from mtrl.sync.replica_state import ReplicaState

__all__ = ["REFILL_NOTE", "ImpalaReplayLearner", "make_impala_replay_learner"]

REFILL_NOTE = (
    "replay not in the checkpoint: refilling (updates train on fresh unrolls alone until a "
    "task's replay holds enough to draw; checkpoint.replay: true keeps it)"
)
"""What a run resumed from a checkpoint without replay contents says, once."""


class ImpalaReplayLearner:
    """A :class:`~mtrl.learner.protocol.Learner` that mixes replayed unrolls into the batches
    of an IMPALA learner (``inner``: any of
    :func:`~mtrl.algorithms.impala.parallel.make_impala_learner`'s learners); everything else
    is ``inner``'s. ``settings``: the ``learner.impala_replay``
    section."""

    def __init__(
        self, inner: Learner, cfg: LearnerConfig, settings: ImpalaReplaySettings, seed: int = 0
    ) -> None:
        self.inner = inner
        self.cfg = cfg
        self.replay_cfg = settings
        model = inner.model
        state_size = int(getattr(model, "state_size", 0))
        self.replays: dict[int, TaskReplay | ShardedTaskReplay] = {}
        for k in inner.local_tasks:  # a task-sharded replica keeps its own tasks' replays
            space = model.spaces[k]
            storage = SequenceStorage(
                k,
                space.observation_space,
                space.action_space,
                cfg.unroll_length,
                sequences(cfg),
                state_size,
            )
            self.replays[k] = task_replay(storage, cfg.replay)
        self.rng = np.random.default_rng(seed)
        self._replayed: dict[int, int] = {}

    # -- the Learner protocol, delegated -----------------------------------------------------

    @property
    def model(self) -> torch.nn.Module:
        return self.inner.model

    @property
    def device(self) -> torch.device:
        return self.inner.device

    @property
    def version(self) -> int:
        return self.inner.version

    @property
    def local_tasks(self) -> list[int]:
        return self.inner.local_tasks

    def set_progress(self, progress: float) -> None:
        self.inner.set_progress(progress)

    # -- the update ----------------------------------------------------------------------------

    def replayed(self, batches: Sequence[TaskBatch]) -> list[TaskBatch]:
        """The replayed batches that go with ``batches`` (stored first; see the module
        docstring), one per task that has enough in its replay."""
        fresh: dict[int, tuple[int, float]] = {}
        for b in batches:
            self.replays[b.task].add_unroll(batch_to_unroll(b))
            columns, weight = fresh.get(b.task, (0, b.loss_weight))
            fresh[b.task] = (columns + int(b.valid.shape[1]), weight)
        out = []
        for task, (columns, weight) in fresh.items():
            n = self.replay_cfg.replayed_columns(columns)
            replay = self.replays[task]
            if n == 0 or replay.sampler.count < n:
                continue
            try:
                seq, _, _ = replay.sample(n, self.rng)
            except ReplayEmptied:  # its shards were lost since the count was taken
                continue
            batch = task_batch(seq, self.device)
            batch.loss_weight = weight
            out.append(batch)
            self._replayed[task] = self._replayed.get(task, 0) + n
        return out

    def update(self, batches: Sequence[TaskBatch]) -> dict[str, float]:
        """Store ``batches``, draw the replayed share, and update on both."""
        replayed = self.replayed(batches)
        metrics = self.inner.update([*batches, *replayed])
        fresh = sum(int(b.valid.shape[1]) for b in batches)
        again = sum(int(b.valid.shape[1]) for b in replayed)
        metrics["impala_replay/replayed_share"] = again / max(fresh + again, 1)
        return metrics

    def pop_diagnostics(self) -> dict[str, float]:
        """``inner``'s, with each task's replay size (sequences) and the sequences replayed
        since the last call."""
        out = self.inner.pop_diagnostics()
        names = getattr(self.inner, "task_names", None)
        for k, replay in self.replays.items():
            name = names[k] if names is not None else str(k)
            out[f"learner/{name}/replay_sequences"] = float(replay.sampler.count)
            out[f"learner/{name}/replayed_sequences"] = float(self._replayed.get(k, 0))
        out.update(replay_metrics(self.replays.values()))
        self._replayed.clear()
        return out

    # -- loosely synchronised replicas: the inner learner's state (the replay stays local) --

    def replica_state(self) -> ReplicaState:
        return self.inner.replica_state()

    def load_replica_state(self, state: ReplicaState) -> None:
        self.inner.load_replica_state(state)

    # -- checkpoints ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """``inner``'s state (its ``model`` at the top, as every rule's), the sampling
        generator and, with ``checkpoint.replay``, each local task's replay."""
        state = dict(self.inner.state_dict())
        state["replay_rng"] = self.rng.bit_generator.state
        if self.cfg.checkpoint_replay:
            state["replay"] = {k: r.state_dict() for k, r in self.replays.items()}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`; without replay contents, say so and refill."""
        state = dict(state)
        rng = state.pop("replay_rng", None)
        saved = state.pop("replay", None)
        self.inner.load_state_dict(state)
        if rng is not None:
            self.rng.bit_generator.state = rng
        if saved is None:
            print(REFILL_NOTE, flush=True)
            return
        for k, replay in self.replays.items():
            replay.load_state_dict(saved[k])


def make_impala_replay_learner(
    model: torch.nn.Module,
    cfg: LearnerConfig,
    task_names: Sequence[str],
    ctx: DistContext | None = None,
    device: torch.device | None = None,
    lr_scales: Sequence[float] | None = None,
    settings: ImpalaReplaySettings | None = None,
) -> ImpalaReplayLearner:
    """The IMPALA learner ``learner.parallel`` asks for (one process, data-parallel,
    task-sharded or FSDP), with replay mixed into its batches; each replica keeps the replay
    of the unrolls its own actors make. ``settings``: the validated ``learner.impala_replay``
    section (None: read from ``cfg``)."""
    ctx = ctx or DistContext.from_env()
    if settings is None:
        settings = cfg.settings("impala_replay", ImpalaReplaySettings)
    inner = make_impala_learner(model, cfg, task_names, ctx, device, lr_scales)
    return ImpalaReplayLearner(inner, cfg, settings, seed=ctx.rank)
