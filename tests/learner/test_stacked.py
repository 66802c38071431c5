"""Several tasks' modules of one shape run as one batched call: the same values and gradients
as one call per task, and SAC's multi-task steps unchanged by it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from mtrl.algorithms.sac import make_sac_learner
from mtrl.config import parse_config
from mtrl.learner import stacked
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.learner.synthetic import random_task_batch


def _mlp(sizes: list[int], bias: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b, bias=bias), nn.Tanh()]
    return nn.Sequential(*layers)


@pytest.mark.parametrize("rows", [[5, 5, 5], [1, 7, 3]])
@pytest.mark.parametrize("bias", [True, False])
def test_stacked_modules_give_each_tasks_values_and_gradients(rows: list[int], bias: bool) -> None:
    torch.manual_seed(0)
    mlps = [_mlp([6, 8, 4], bias) for _ in rows]
    xs = [torch.randn(n, 6) for n in rows]
    together = stacked.run_stacked(mlps, xs)
    sum(y.square().sum() for y in together).backward()
    grads = [[p.grad.clone() for p in m.parameters()] for m in mlps]
    for m in mlps:
        m.zero_grad()
    alone = [m(x) for m, x in zip(mlps, xs, strict=True)]
    sum(y.square().sum() for y in alone).backward()
    for y, z in zip(together, alone, strict=True):
        torch.testing.assert_close(y, z)
    for m, gs in zip(mlps, grads, strict=True):
        for p, g in zip(m.parameters(), gs, strict=True):
            torch.testing.assert_close(g, p.grad)


def test_only_modules_of_one_shape_are_grouped() -> None:
    a, b, c = _mlp([6, 8]), _mlp([6, 8]), _mlp([5, 8])
    conv = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU())
    keys = [stacked.stack_signature(m) for m in (a, c, b, conv, nn.Linear(6, 8))]
    assert keys[0] == keys[2] != keys[1]
    assert keys[3] is None
    assert stacked.group_by_signature(keys) == [[0, 2], [1], [3], [4]]
    assert stacked.stack_signature(nn.Sequential(nn.Linear(2, 2), nn.Tanh())) != (
        stacked.stack_signature(nn.Sequential(nn.Linear(2, 2), nn.ReLU()))
    )


def test_by_default_modules_on_the_cpu_run_one_by_one() -> None:
    """On the CPU a small matmul costs its arithmetic, which stacking does not save (measured
    slower on MT10's SAC step); on a CUDA GPU it costs its launch (tests/gpu checks it there)."""
    assert stacked.STACKED is None
    assert not stacked.enabled([nn.Linear(2, 2), nn.Linear(2, 2)])
    assert not stacked.enabled([nn.Linear(2, 2, device="meta"), nn.Linear(2, 2, device="meta")])
    try:
        stacked.STACKED = True
        assert stacked.enabled([nn.Linear(2, 2), nn.Linear(2, 2)])
    finally:
        stacked.STACKED = None


SPACES = [
    TaskSpaces(spaces.Box(-8, 8, (3,), np.float32), spaces.Box(-2, 2, (1,), np.float32)),
    TaskSpaces(spaces.Box(-8, 8, (3,), np.float32), spaces.Box(-1, 1, (1,), np.float32)),
    TaskSpaces(spaces.Box(-5, 5, (4,), np.float32), spaces.Discrete(2)),
    TaskSpaces(spaces.Box(0, 9, (3,), np.int64), spaces.Box(-1, 1, (1,), np.float32)),
    TaskSpaces(spaces.Box(-1, 1, (5,), np.float32), spaces.Box(-1, 1, (2,), np.float32)),
]
T = 6


def _sac():
    cfg = parse_config(
        "tasks: [{env: a/b}]\n"
        f"learner: {{algorithm: sac, unroll_length: {T}, model: {{encoder_dim: 16, torso: [16]}},"
        " sac: {learning_starts: 12, batch_size: 40, replay_ratio: 10}}\n"
    )
    torch.manual_seed(0)
    model = MultiTaskModel(SPACES, cfg.learner.model)
    learner = make_sac_learner(model, cfg.learner, [f"t{k}" for k in range(len(SPACES))])
    return learner


def test_sac_steps_the_same_whether_tasks_run_stacked_or_one_by_one() -> None:
    """Three Box tasks share their encoders' and heads' shapes (one stacked call each), the
    others run alone; every parameter after a run of gradient steps matches the per-task
    code's to float rounding."""
    learners = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the trainer runs it (two threads spin on a loaded machine)
    for stack in (True, False):
        stacked.STACKED = stack
        try:
            learner = _sac()
            torch.manual_seed(1)
            for step in range(4):
                learner.update(
                    [
                        random_task_batch(k, s, T, 2, seed=10 * step + k)
                        for k, s in enumerate(SPACES)
                    ]
                )
            learners[stack] = learner
        finally:
            stacked.STACKED = None
    torch.set_num_threads(threads)
    a, b = learners[True], learners[False]
    assert a.gradient_steps == b.gradient_steps > 10
    for (name, p), q in zip(a.model.named_parameters(), b.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)
    for (name, p), q in zip(a.critic.named_parameters(), b.critic.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)
