"""Data-parallel SAC (``learner.algorithm: sac`` with ``learner.parallel.data_parallel > 1``):
N learner replicas under torchrun, each with its own actors and its own per-task replays.

Replay stays where its env steps were taken: no transition crosses the network. What the
replicas share, so that they take the *same* step as one learner would on the union of their
batches:

1. **how many gradient steps**: the fresh env steps of ready tasks are summed over replicas,
   and a gradient step trains ``replicas x learner.sac.batch_size`` samples (each replica
   draws ``batch_size`` from its own replays), so the replay ratio (samples per env step)
   holds for the whole job; no replica steps until every one has a ready task;
2. **each gradient**: the critic and policy gradients are averaged over replicas (one flat
   all-reduce each) before the clip and the optimiser step, so with every replica drawing
   ``batch_size`` rows the step is that of the ``N x batch_size`` mean loss; with
   ``learner.multitask.gradients`` combining the tasks' gradients, the per-task gradients of
   the shared torsos are averaged too, before the combination;
3. **each temperature**: per task, sample counts and entropy sums are summed over replicas,
   so a task's temperature follows its mean entropy over the whole batch; with FAMO
   (``learner.multitask.loss_weighting: famo``) each task's critic loss sums before and after
   the critics' step likewise, so every replica weighs the tasks alike and moves FAMO's logits
   alike;
4. **the logged losses**: averaged over replicas once per update. The per-task diagnostics
   (``learner/<task>/q``, ...) are rank 0's own.

Initial parameters, and the networks re-initialised by a reset (``learner.sac.reset_every``),
are broadcast from rank 0 and every later change is computed identically, so the replicas stay
equal; each keeps its own sampling RNG (seeded per rank by the trainer).
Prioritized replay corrects each replica's draw by its own replay's importance weights.

Checkpoints hold rank 0's replicas' state (they are equal) and, with ``checkpoint.replay``,
rank 0's replay contents; on resume rank 0 takes them back and the other replicas refill
theirs, saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from mtrl.algorithms.sac.learner import REFILL_NOTE, SacLearner
from mtrl.algorithms.sac.sampling import ReplayRatio
from mtrl.config import LearnerConfig
from mtrl.learner.distributed import DistContext, all_reduce_gradients, broadcast_parameters
from mtrl.learner.model import MultiTaskModel

__all__ = ["OTHER_RANKS_REFILL", "DataParallelSacLearner"]

OTHER_RANKS_REFILL = (
    "rank {rank}: the checkpoint holds rank 0's replay only: refilling this replica's "
    "(its tasks train again once they hold learner.sac.learning_starts transitions)"
)
"""What a replica other than rank 0 says on resume from a checkpoint with replay contents."""


class DataParallelSacLearner(SacLearner):
    """One SAC replica of a torchrun job (see the module docstring)."""

    distributed = True

    def __init__(
        self,
        model: MultiTaskModel,
        cfg: LearnerConfig,
        task_names: Sequence[str],
        ctx: DistContext,
        lr_scales: Sequence[float] | None = None,
    ) -> None:
        if not dist.is_initialized():
            raise RuntimeError(
                "DataParallelSacLearner needs a torch.distributed process group: call "
                "DistContext.from_env().init(device) first (under torchrun)"
            )
        super().__init__(model, cfg, task_names, lr_scales)
        self.ctx = ctx
        self.world = ctx.world_size
        # A gradient step trains world x batch_size samples, for the env steps of every replica.
        self.ratio = ReplayRatio(self.sac.replay_ratio, self.sac.batch_size * self.world)
        # Start equal: rank 0's policy, critics (the targets copy them) and temperatures.
        broadcast_parameters([*self.model.parameters(), *self.critic_params, self.log_alpha])
        self.target.load_state_dict(self.critic.state_dict())

    def _owed_steps(self, new_steps: int, ready: bool) -> int:
        """Steps for the env steps of every replica, once every replica has a ready task."""
        t = torch.tensor(
            [float(new_steps), 0.0 if ready else 1.0], dtype=torch.float64, device=self.device
        )
        dist.all_reduce(t)
        total, waiting = t.tolist()
        return self.ratio.steps(int(total)) if waiting == 0 else 0

    def _task_sums(
        self, count: torch.Tensor, total: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        both = torch.stack([count, total])
        dist.all_reduce(both)
        return both[0], both[1]

    def _reduce_gradients(self, params: Sequence[torch.Tensor]) -> None:
        grads = [p for p in params if p.requires_grad]
        all_reduce_gradients(grads)
        with torch.no_grad():
            for p in grads:
                if p.grad is not None:
                    p.grad.div_(self.world)

    def _share_reset(self) -> None:
        """Rank 0's fresh networks on every replica (each drew its own), as at the start."""
        broadcast_parameters([*self.model.parameters(), *self.critic_params])

    def _reduce_task_gradients(self, grads: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(grads)
        return grads.div_(self.world)

    def _batch_mean(self, losses: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(losses)
        return losses / self.world

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Rank 0's state; a replica other than rank 0 keeps its own sampling RNG (seeded per
        rank) and refills its replay."""
        if self.ctx.rank == 0:
            super().load_state_dict(state)
            return
        own_rng = self.rng.bit_generator.state
        super().load_state_dict({k: v for k, v in state.items() if k != "replay"}, quiet=True)
        self.rng.bit_generator.state = own_rng
        note = OTHER_RANKS_REFILL if "replay" in state else REFILL_NOTE
        print(note.format(rank=self.ctx.rank), flush=True)
