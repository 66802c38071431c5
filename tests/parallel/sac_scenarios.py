"""The data-parallel SAC scenario shared by the torchrun worker and the test.

Three tasks (two Discrete of different sizes, one Box) and four updates whose fresh unrolls
are split unevenly between two ranks (rank 1 brings nothing to the third). Each gradient step
trains fixed rows instead of replay draws, and a Box task's policy noise is zero, so one
process with twice the batch, drawing the union of the ranks' rows, must take the same steps:
:class:`FixedRows` makes both learners draw them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import torch
from gymnasium import spaces

from mtrl.algorithms.sac import stacked_step
from mtrl.algorithms.sac.batch import Group
from mtrl.algorithms.sac.learner import SacLearner
from mtrl.algorithms.sac.parallel import DataParallelSacLearner
from mtrl.algorithms.sac.stacked_batch import HostBatch, draw
from mtrl.config import LearnerConfig, parse_config
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel, TaskSpaces

WORLD = 2
T = 8
BATCH = 32  # per rank
NAMES = ["discrete2", "discrete3", "box"]
SPACES = [
    TaskSpaces(spaces.Box(-5, 5, (4,), np.float32), spaces.Discrete(2)),
    TaskSpaces(spaces.Box(-5, 5, (3,), np.float32), spaces.Discrete(3)),
    TaskSpaces(spaces.Box(-5, 5, (3,), np.float32), spaces.Box(-2, 2, (1,), np.float32)),
]
#: Rows each rank trains per gradient step, per task (each row sums to BATCH).
ROWS = [[12, 10, 10], [4, 20, 8]]
#: Per update and rank: the (task, env columns) of the unrolls it brings.
UNROLLS: list[list[list[tuple[int, int]]]] = [
    [[(0, 4), (1, 4), (2, 4)], [(0, 6), (1, 2), (2, 4)]],
    [[(1, 8)], [(0, 4), (2, 4)]],
    [[(2, 10)], []],
    [[(0, 3)], [(1, 9), (2, 5)]],
]


def learner_config(
    batch_size: int, max_grad_norm: float | None = 0.5, gradients: str = "sum"
) -> LearnerConfig:
    """SAC with a small model, gradients clipped at ``max_grad_norm`` (None: not clipped),
    the tasks' torso gradients combined by ``gradients`` (``famo``: summed, the critic losses
    weighted by FAMO)."""
    clip = "null" if max_grad_norm is None else max_grad_norm
    multitask = "loss_weighting: famo" if gradients == "famo" else f"gradients: {gradients}"
    return parse_config(
        "tasks: [{env: a/b}]\n"
        f"learner: {{algorithm: sac, unroll_length: {T}, model: {{encoder_dim: 16, "
        f"torso: [16]}}, multitask: {{{multitask}}}, sac: {{batch_size: "
        f"{batch_size}, replay_ratio: 8, learning_starts: 1, max_grad_norm: {clip}, "
        "tau: 0.05, alpha_lr: 0.01}}\n"
    ).learner


def build_model() -> MultiTaskModel:
    torch.manual_seed(0)
    return MultiTaskModel(SPACES, learner_config(BATCH).model)


def _unroll(update: int, rank: int, task: int, columns: int) -> TaskBatch:
    rng = np.random.default_rng([update, rank, task])
    space = SPACES[task]
    dim = space.observation_space.shape[0]
    if isinstance(space.action_space, spaces.Box):
        actions = torch.as_tensor(rng.normal(size=(T, columns, 1)), dtype=torch.float32)
    else:
        actions = torch.as_tensor(rng.integers(0, int(space.action_space.n), (T, columns)))
    return TaskBatch(
        task=task,
        obs=torch.as_tensor(rng.normal(size=(T + 1, columns, dim)), dtype=torch.float32),
        actions=actions,
        behaviour_logp=torch.zeros(T, columns),
        rewards=torch.as_tensor(rng.normal(size=(T, columns)), dtype=torch.float32),
        terminated=torch.zeros(T, columns, dtype=torch.bool),
        truncated=torch.zeros(T, columns, dtype=torch.bool),
        valid=torch.ones(T, columns, dtype=torch.bool),
        policy_version=0,
        loss_weight=1.0,
    )


def unrolls(update: int, ranks: Sequence[int]) -> list[TaskBatch]:
    """The unrolls ``ranks`` bring to ``update`` (one rank's, or all of them for one process)."""
    return [_unroll(update, r, task, n) for r in ranks for task, n in UNROLLS[update][r]]


def _rows(step: int, rank: int, task: int) -> dict[str, np.ndarray]:
    """Rank ``rank``'s rows of ``task`` for gradient step ``step``."""
    rng = np.random.default_rng([1000 + step, rank, task])
    n = ROWS[rank][task]
    space = SPACES[task]
    dim = space.observation_space.shape[0]
    box = isinstance(space.action_space, spaces.Box)
    return {
        "obs": rng.normal(size=(n, dim)).astype(np.float32),
        "next_obs": rng.normal(size=(n, dim)).astype(np.float32),
        "actions": (
            rng.normal(size=(n, 1)).astype(np.float32)
            if box
            else rng.integers(0, int(space.action_space.n), n)
        ),
        "rewards": (3.0 * rng.normal(size=n)).astype(np.float32),
        "terminated": rng.random(n) < 0.2,
    }


def fixed_groups(step: int, ranks: Sequence[int]) -> list[Group]:
    """Gradient step ``step``'s batch of ``ranks`` (each task's rows rank by rank), grouped as
    :func:`mtrl.algorithms.sac.batch.draw_groups` groups replay draws."""
    groups = []
    for box, tasks in ((False, [0, 1]), (True, [2])):
        # The two Discrete tasks differ in size: a group each; the Box task is one group.
        members = [tasks] if box else [[t] for t in tasks]
        for member in members:
            parts = {t: [_rows(step, r, t) for r in ranks] for t in member}
            joined = {
                t: {k: np.concatenate([p[k] for p in ps]) for k in ps[0]} for t, ps in parts.items()
            }
            sizes = [len(joined[t]["rewards"]) for t in member]
            n = sum(sizes)
            groups.append(
                Group(
                    box=box,
                    tasks=list(member),
                    sizes=sizes,
                    obs=[torch.as_tensor(joined[t]["obs"]) for t in member],
                    next_obs=[torch.as_tensor(joined[t]["next_obs"]) for t in member],
                    actions=torch.as_tensor(np.concatenate([joined[t]["actions"] for t in member])),
                    rewards=torch.as_tensor(np.concatenate([joined[t]["rewards"] for t in member])),
                    terminated=torch.as_tensor(
                        np.concatenate([joined[t]["terminated"] for t in member])
                    ),
                    weights=torch.ones(n),
                    rows=torch.repeat_interleave(torch.tensor(member), torch.tensor(sizes)),
                    indices=[np.arange(s) for s in sizes],
                )
            )
    return groups


class FixedRows:
    """Mixin: gradient step ``i`` trains :func:`fixed_groups` of this learner's ``ranks``,
    with zero policy noise."""

    ranks: Sequence[int]
    drawn = 0

    def _sample(self, ready: Sequence[int]) -> list[Group]:
        groups = fixed_groups(self.drawn, self.ranks)
        self.drawn += 1
        return groups

    def _draw_stacked(
        self, ready: Sequence[int], counts: Sequence[int], rows: Sequence[int] | None
    ) -> HostBatch:
        """The stacked step's batch of the same fixed rows (counts are the fixed ones)."""
        step = self.drawn
        self.drawn += 1
        replays = [_FixedReplay(step, self.ranks, task) for task in range(len(SPACES))]
        fixed = [sum(ROWS[r][task] for r in self.ranks) for task in range(len(SPACES))]
        groups = self.stacked.groups  # type: ignore[attr-defined]
        return draw(groups, replays, list(range(len(SPACES))), fixed, np.random.default_rng(0))

    def _noise_like(self, mean: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(mean)


class _FixedReplay:
    """A replay whose draw is :func:`_rows` of ``ranks`` for one step and task."""

    def __init__(self, step: int, ranks: Sequence[int], task: int) -> None:
        self.parts = [_rows(step, r, task) for r in ranks]

    def sample(self, n: int, rng: np.random.Generator) -> tuple[Any, np.ndarray, np.ndarray]:
        joined = {k: np.concatenate([p[k] for p in self.parts]) for k in self.parts[0]}
        assert len(joined["rewards"]) == n
        return SimpleNamespace(**joined), np.arange(n), np.ones(n)


class FixedRowsSac(FixedRows, SacLearner):
    """One process drawing every rank's rows (the reference)."""

    ranks: ClassVar[list[int]] = list(range(WORLD))


class FixedRowsDataParallelSac(FixedRows, DataParallelSacLearner):
    """One replica drawing its own rank's rows."""


def run(learner: Any) -> dict[str, Any]:
    """Feed the scenario's updates; what the test compares."""
    metrics = []
    for update in range(len(UNROLLS)):
        metrics.append(learner.update(unrolls(update, learner.ranks)))
    return {
        "metrics": metrics,
        "model": {k: v.clone() for k, v in learner.model.state_dict().items()},
        "critic": {k: v.clone() for k, v in learner.critic.state_dict().items()},
        "target": {k: v.clone() for k, v in learner.target.state_dict().items()},
        "log_alpha": learner.log_alpha.detach().clone(),
        "gradient_steps": learner.gradient_steps,
        **({} if learner.famo is None else {"famo_logits": learner.famo.logits.detach().clone()}),
    }


@contextmanager
def step_path(stacked: bool) -> Iterator[None]:
    """Learners built within take SAC's stacked step (True) or the per-task step."""
    before = stacked_step.ENABLED
    stacked_step.ENABLED = stacked
    try:
        yield
    finally:
        stacked_step.ENABLED = before


def run_single_process(
    max_grad_norm: float | None = 0.5, gradients: str = "sum", stacked: bool = True
) -> dict[str, Any]:
    """The scenario in one process drawing every rank's rows, with twice the batch."""
    cfg = learner_config(WORLD * BATCH, max_grad_norm, gradients)
    with step_path(stacked):
        learner = FixedRowsSac(build_model(), cfg, NAMES)
    assert (learner.stacked is not None) is stacked
    return run(learner)
