"""The multi-task problem every parallel test solves: spaces, config, batches, their split.

Imported by the tests (the single-process reference) and by ``dist_worker.py`` (the ranks
under torchrun), so both sides build the same model and the same batches from seeds. A mode
``recurrent-<model_parallel>`` runs the same problem with the recurrent core of
:data:`RECURRENT` (its batches then carry random initial core states); a ``pcgrad-`` or
``cagrad-`` prefix combines the tasks' torso gradients that way (``learner.multitask``), a
``moe-``, ``moore-`` or ``soft_modular-`` prefix makes the torso task-conditioned
(``learner.model.torso_mixture``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.config import LearnerConfig
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.learner.synthetic import random_task_batch, split_columns

SPACES = [
    TaskSpaces(spaces.Box(-np.inf, np.inf, (6,), np.float32), spaces.Discrete(3)),
    TaskSpaces(spaces.Box(-1, 1, (5,), np.float32), spaces.Box(-2, 2, (2,), np.float32)),
    TaskSpaces(spaces.Box(0, 255, (4, 10, 10), np.uint8), spaces.Discrete(5)),
    TaskSpaces(
        spaces.Dict(
            {
                "pos": spaces.Box(-1, 1, (3,), np.float32),
                "cell": spaces.Discrete(5),
                "action_mask": spaces.Box(0, 1, (4,), np.int8),
            }
        ),
        spaces.Discrete(4),
    ),
]
NAMES = ["vector", "continuous", "image", "masked"]
REWARD_SCALES = [1.0, 100.0, 0.1, 10.0]
# Per-task step-size multipliers (TaskConfig.learning_rate_scale): the optimiser's groups
# must agree over ranks, merge in a task-sharded state and come back on resume.
LR_SCALES = [1.0, 2.0, 0.5, 1.0]
UNROLL = 5
ATOL, RTOL = 1e-5, 1e-5  # float32 sums in another order; updates agree to ~3e-8
WORLD = 2
CFG: dict[str, Any] = {
    "model": {"encoder_dim": 16, "torso": [32, 16]},
    "popart": {"beta": 0.1},
    "learning_rate": 1e-3,
    "max_grad_norm": 0.3,  # below the norms seen, so the global clip is exercised
}

# Per update: (task, num_envs, seed, rank that gets it; None = its columns split over ranks).
# Update 0 leaves task 3 out everywhere (its parameters must keep grad=None, as on one
# process) and gives each rank a different task subset; update 2 leaves rank 1 idle.
STEPS: list[list[tuple[int, int, int, int | None]]] = [
    [(0, 4, 11, 0), (1, 3, 12, 0), (2, 2, 13, 1), (0, 4, 14, None)],
    [(3, 4, 21, 1), (1, 4, 22, None), (2, 3, 23, 0), (0, 2, 24, 1)],
    [(0, 3, 31, 0), (3, 2, 32, 0), (1, 2, 33, 0)],
]


#: The recurrent core of each ``recurrent-<model_parallel>`` mode: shared LSTMs, and per-task
#: GRUs where tasks are sharded (each rank then owns its tasks' cores).
RECURRENT: dict[str, dict[str, Any]] = {
    "none": {"kind": "lstm", "hidden": 12},
    "task_sharded": {"kind": "gru", "hidden": 12, "shared": False},
    "fsdp": {"kind": "lstm", "hidden": 12},
}


#: Mode prefixes naming a ``learner.multitask.gradients`` combination (default: ``sum``).
COMBINATIONS = ("pcgrad", "cagrad")
#: Mode prefixes naming a task-conditioned torso (``learner.model.torso_mixture.kind``).
MIXTURES = ("moe", "moore", "soft_modular")


def scenario(mode: str) -> tuple[str, dict[str, Any] | None, str, str | None]:
    """``(model_parallel, core config or None, gradient combination, torso mixture or None)``
    of a mode name: ``[moe-|moore-|soft_modular-][pcgrad-|cagrad-][recurrent-]<model_parallel>``."""
    gradients, mixture = "sum", None
    for kind in MIXTURES:
        if mode.startswith(f"{kind}-"):
            mixture, mode = kind, mode.removeprefix(f"{kind}-")
    for how in COMBINATIONS:
        if mode.startswith(f"{how}-"):
            gradients, mode = how, mode.removeprefix(f"{how}-")
    if mode.startswith("recurrent-"):
        parallel = mode.removeprefix("recurrent-")
        return parallel, RECURRENT[parallel], gradients, mixture
    return mode, None, gradients, mixture


def learner_config(mode: str = "none") -> LearnerConfig:
    parallel, core, gradients, mixture = scenario(mode)
    model = {**CFG["model"], "core": core}
    if mixture is not None:
        model["torso_mixture"] = {"kind": mixture, "experts": 3}
    return LearnerConfig.model_validate(
        {
            **CFG,
            "model": model,
            "parallel": {"model_parallel": parallel},
            "multitask": {"gradients": gradients},
        }
    )


def build_model(mode: str = "none") -> MultiTaskModel:
    torch.manual_seed(0)
    return MultiTaskModel(SPACES, learner_config(mode).model)


def state_size(mode: str) -> int:
    """Floats of core state per env copy in ``mode`` (0: feed-forward)."""
    return build_model(mode).state_size


def _batch(step: int, task: int, num_envs: int, seed: int, states: int = 0) -> TaskBatch:
    return random_task_batch(
        task,
        SPACES[task],
        UNROLL,
        num_envs,
        seed=seed,
        reward_scale=REWARD_SCALES[task],
        policy_version=max(step - seed % 2, 0),
        state_size=states,
    )


def all_batches(step: int, states: int = 0) -> list[TaskBatch]:
    """The whole batch of update ``step`` (what one process learns from)."""
    return [_batch(step, t, n, s, states) for t, n, s, _ in STEPS[step]]


def data_parallel_shard(step: int, rank: int, states: int = 0) -> list[TaskBatch]:
    """Rank ``rank``'s share of update ``step``: whole batches or a slice of columns."""
    out = []
    for t, n, s, owner in STEPS[step]:
        b = _batch(step, t, n, s, states)
        if owner is None:
            out.append(split_columns(b, WORLD)[rank])
        elif owner == rank:
            out.append(b)
    return out


def task_shard(step: int, local_tasks: list[int], states: int = 0) -> list[TaskBatch]:
    """The batches of update ``step`` whose task this rank owns."""
    return [b for b in all_batches(step, states) if b.task in local_tasks]


def run_single_process(mode: str = "none") -> dict[str, Any]:
    """The reference: one plain ImpalaLearner on every whole batch (with ``mode``'s model)."""
    learner = ImpalaLearner(build_model(mode), learner_config(mode), NAMES, LR_SCALES)
    states = learner.model.state_size
    metrics = [learner.update(all_batches(i, states)) for i in range(len(STEPS))]
    state = {k: v.detach().clone() for k, v in learner.model.state_dict().items()}
    return {"state": state, "mu": learner.mu, "nu": learner.nu, "metrics": metrics}


def assert_matches_single_process(result: dict[str, Any], ref: dict[str, Any]) -> None:
    """Parameters, PopArt statistics and metrics of one rank equal the reference's."""
    assert result["state"].keys() == ref["state"].keys()
    for name, want in ref["state"].items():
        torch.testing.assert_close(result["state"][name], want, atol=ATOL, rtol=RTOL, msg=name)
    torch.testing.assert_close(result["mu"], ref["mu"], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(result["nu"], ref["nu"], atol=1e-6, rtol=1e-6)
    assert len(result["metrics"]) == len(ref["metrics"])
    for got, want in zip(result["metrics"], ref["metrics"], strict=True):
        # The torso-gradient share is measured apart by single-process learners only (with
        # combined gradients, everywhere); every other figure, the per-task diagnostics
        # included, is reduced over replicas and must match.
        want = {k: v for k, v in want.items() if not k.endswith("/torso_grad_share")}
        got = {k: v for k, v in got.items() if not k.endswith("/torso_grad_share")}
        assert got.keys() == want.keys()
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-5), key


def assert_ranks_identical(results: list[dict[str, Any]]) -> None:
    """Every rank ends with bit-identical parameters and PopArt statistics."""
    first = results[0]
    for other in results[1:]:
        for name, t in first["state"].items():
            assert torch.equal(t, other["state"][name]), f"{name} differs between ranks"
        assert torch.equal(first["mu"], other["mu"])
        assert torch.equal(first["nu"], other["nu"])
