"""The learner and inference on an XLA device (torch_xla) agree with eager CPU torch.

Runs where torch_xla imports (scripts/xla_tests.sh builds such a venv, torch 2.9 +
torch_xla 2.9, on the CPU PJRT device); elsewhere every test is skipped with the reason.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.config import LearnerConfig
from mtrl.learner.batch import task_batch
from mtrl.learner.device import Accelerator, resolve_device, xla_unavailable_reason
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.learner.synthetic import random_task_batch

REASON = xla_unavailable_reason()
pytestmark = pytest.mark.skipif(
    REASON is not None, reason=f"XLA path untested here (run scripts/xla_tests.sh): {REASON}"
)

SPACES = [
    TaskSpaces(spaces.Box(-np.inf, np.inf, (6,), np.float32), spaces.Discrete(3)),
    TaskSpaces(spaces.Box(-1, 1, (5,), np.float32), spaces.Box(-2, 2, (2,), np.float32)),
    TaskSpaces(spaces.Box(0, 255, (4, 10, 10), np.uint8), spaces.Discrete(5)),
]
NAMES = ["vector", "continuous", "image"]
CFG = LearnerConfig.model_validate(
    {"model": {"encoder_dim": 16, "torso": [32, 16]}, "popart": {"beta": 0.1}, "max_grad_norm": 0.5}
)


def _batches(step: int):
    scales = [1.0, 100.0, 0.1]
    return [
        random_task_batch(k, SPACES[k], 5, 4, seed=100 * step + k, reward_scale=scales[k])
        for k in range(len(SPACES))
    ]


def _model() -> MultiTaskModel:
    torch.manual_seed(0)
    return MultiTaskModel(SPACES, CFG.model)


@pytest.mark.timeout(300)
def test_updates_on_xla_equal_eager_cpu_updates() -> None:
    device = resolve_device("xla")
    assert device.type == "xla"
    cpu = ImpalaLearner(_model(), CFG, NAMES)
    xla = ImpalaLearner(copy.deepcopy(cpu.model).to(device), CFG, NAMES)
    for step in range(2):
        batches = _batches(step)
        want = cpu.update(batches)
        got = xla.update([task_batch(b, device) for b in batches])
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=1e-4, abs=1e-5), key
    for name, p in cpu.model.state_dict().items():
        torch.testing.assert_close(
            xla.model.state_dict()[name].cpu(), p, atol=1e-5, rtol=1e-4, msg=name
        )
    torch.testing.assert_close(xla.mu.cpu(), cpu.mu, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(xla.nu.cpu(), cpu.nu, atol=1e-6, rtol=1e-6)


@pytest.mark.timeout(300)
def test_short_training_on_xla_runs_and_moves_the_parameters() -> None:
    device = resolve_device("xla")
    learner = ImpalaLearner(_model().to(device), CFG, NAMES)
    before = {k: v.cpu().clone() for k, v in learner.model.state_dict().items()}
    losses = [learner.update([task_batch(b, device) for b in _batches(s)]) for s in range(6)]
    assert learner.version == 6
    assert all(np.isfinite(m["losses/total"]) for m in losses)
    moved = [not torch.equal(before[k], v.cpu()) for k, v in learner.model.state_dict().items()]
    assert all(moved)


@pytest.mark.timeout(300)
def test_inference_on_xla_equals_eager_cpu() -> None:
    device = resolve_device("xla")
    cpu = _model().eval()
    xla = copy.deepcopy(cpu).to(device)
    for k, b in enumerate(_batches(0)):
        with torch.no_grad():
            dist_cpu, value_cpu = cpu(k, b.obs[0])
            dist_xla, value_xla = xla(k, b.obs[0].to(device))
            logp_cpu = dist_cpu.log_prob(b.actions[0])
            logp_xla = dist_xla.log_prob(b.actions[0].to(device))
        torch.testing.assert_close(value_xla.cpu(), value_cpu, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(logp_xla.cpu(), logp_cpu, atol=1e-5, rtol=1e-4)


def test_the_accelerator_cuts_the_graph_and_picks_the_xla_backend() -> None:
    acc = Accelerator(resolve_device("xla"))
    assert acc.dist_backend == "xla"
    x = acc.to_device(torch.arange(4.0)) * 2
    acc.after_step()
    acc.synchronize()
    assert x.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
