"""Task-conditioned torsos (``learner.model.torso_mixture``): MOORE's experts are orthonormal
per input, the MoE gate is a distribution over experts, soft modularization's routes are
distributions and its layers read exactly the routed mixtures, a row's features depend on its
task, each task's embedding learns from its own rows only, and each trains end to end (IMPALA,
SAC), resumes from a checkpoint and combines with PCGrad."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.config import LearnerConfig, parse_config
from mtrl.config.multitask import TorsoMixtureConfig
from mtrl.errors import ConfigError
from mtrl.learner.model import MultiTaskModel
from mtrl.learner.torsos import (
    MixtureTorso,
    SoftModularTorso,
    conditioned_torso,
    orthonormal_columns,
)
from mtrl.train.trainer import Trainer
from tests.two_task_batches import SPACES, two_task_batch


def test_orthonormal_columns_are_orthonormal_and_span_the_same_space() -> None:
    u = torch.randn(7, 16, 4, dtype=torch.float64)
    q = orthonormal_columns(u)
    torch.testing.assert_close(
        q.transpose(-1, -2) @ q, torch.eye(4, dtype=torch.float64).expand(7, 4, 4)
    )
    # Gram–Schmidt keeps the order: the first column is the first expert's direction.
    first = u[..., 0] / u[..., 0].norm(dim=-1, keepdim=True)
    torch.testing.assert_close(q[..., 0], first)
    # Each expert is a combination of the orthonormal columns before it (triangular).
    coef = q.transpose(-1, -2) @ u
    assert torch.allclose(torch.tril(coef, diagonal=-1), torch.zeros_like(coef), atol=1e-10)


@pytest.mark.parametrize("kind", ["moe", "moore", "soft_modular"])
def test_a_rows_features_depend_on_its_task_and_gradients_reach_its_embedding_only(
    kind: str,
) -> None:
    torch.manual_seed(0)
    mix = TorsoMixtureConfig(kind=kind, experts=4, task_embedding=5)
    torso = conditioned_torso(8, [16, 12], "relu", 3, mix)
    x = torch.randn(6, 8)
    h0, h2 = torso(x, 0), torso(x, 2)
    assert h0.shape == (6, 12) and not torch.allclose(h0, h2)
    tasks = torch.tensor([0, 0, 2, 2, 2, 0])
    mixed = torso(x, tasks)
    torch.testing.assert_close(mixed[tasks == 0], h0[tasks == 0])
    torch.testing.assert_close(mixed[tasks == 2], h2[tasks == 2])
    torso(x, 2).sum().backward()
    grad = torso.task_embedding.weight.grad
    assert grad[2].abs().sum() > 0 and grad[0].abs().sum() == 0 and grad[1].abs().sum() == 0
    if kind == "moore":
        assert h0.abs().max() <= 1  # tanh of the orthonormal mixture


def test_moe_weights_are_a_distribution_over_experts() -> None:
    torch.manual_seed(1)
    torso = MixtureTorso(4, [6], "relu", num_tasks=2, kind="moe", experts=3, embedding=2)
    x = torch.randn(5, 4)
    outs = torch.stack([f(x) for f in torso.experts], dim=-1)
    gate = torch.softmax(torso.weights(torso.task_embedding(torch.tensor([1]))), dim=-1)
    torch.testing.assert_close(torso(x, 1), (outs * gate).sum(-1))


def test_soft_modular_routes_are_distributions_and_each_module_reads_its_routed_mixture() -> None:
    torch.manual_seed(2)
    torso = SoftModularTorso(5, [7, 6, 4], "tanh", num_tasks=3, modules=3, embedding=4)
    x, tasks = torch.randn(9, 5), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2])
    routes = torso.routes(x, tasks)
    assert [r.shape for r in routes] == [(9, 3, 3), (9, 3, 3)]  # one per pair of layers
    for r in routes:
        torch.testing.assert_close(r.sum(-1), torch.ones(9, 3))
        assert (r > 0).all()
    # The same torso, module by module, written out with explicit loops.
    w0, b0 = torso.layers[0].weight, torso.layers[0].bias
    outs = [torch.tanh(x @ w0[e] + b0[e]) for e in range(3)]
    for route, layer in zip(routes, torso.layers[1:], strict=True):
        outs = [
            torch.tanh(
                sum(route[:, j, i : i + 1] * outs[i] for i in range(3)) @ layer.weight[j]
                + layer.bias[j]
            )
            for j in range(3)
        ]
    torch.testing.assert_close(torso(x, tasks), sum(outs))
    # Later routes read the earlier ones: a change to the first route's output layer moves both.
    with torch.no_grad():
        torso.route_out[0].bias.add_(torch.randn(9))
    moved = torso.routes(x, tasks)
    assert not torch.allclose(moved[0], routes[0]) and not torch.allclose(moved[1], routes[1])


def test_soft_modular_needs_two_layers_to_route_between() -> None:
    with pytest.raises(ValueError, match="at least two widths"):
        SoftModularTorso(4, [8], "relu", num_tasks=2, modules=2, embedding=2)


def test_too_many_orthogonal_experts_for_the_width_are_refused() -> None:
    with pytest.raises(ValueError, match="cannot be orthonormal in 4 dimensions"):
        MixtureTorso(4, [4], "relu", num_tasks=2, kind="moore", experts=5, embedding=2)


def _learner(kind: str, gradients: str = "sum") -> ImpalaLearner:
    torch.manual_seed(0)
    torso = [16, 16, 16] if kind == "soft_modular" else [16]  # two routes between layers
    cfg = LearnerConfig.model_validate(
        {
            "model": {"encoder_dim": 16, "torso": torso, "torso_mixture": {"kind": kind}},
            "multitask": {"gradients": gradients},
        }
    )
    return ImpalaLearner(MultiTaskModel(SPACES, cfg.model), cfg, ["a", "b"])


@pytest.mark.parametrize(
    "kind, gradients",
    [("moe", "sum"), ("moore", "sum"), ("moore", "pcgrad"), ("soft_modular", "pcgrad")],
)
def test_the_learner_trains_a_conditioned_torso_and_resumes_it(kind: str, gradients: str) -> None:
    learner = _learner(kind, gradients)
    before = {k: v.clone() for k, v in learner.model.state_dict().items()}
    batches = [two_task_batch(0, 1.0, 10), two_task_batch(1, 30.0, 110)]
    for _ in range(3):
        metrics = learner.update(batches)
    assert np.isfinite(metrics["losses/total"])
    state = learner.model.state_dict()
    keys = (
        ("torso.route_out.0.weight", "torso.route_cond.0.weight", "torso.layers.1.weight")
        if kind == "soft_modular"
        else ("torso.weights.weight", "torso.experts.3.0.weight")
    )
    for key in ("torso.task_embedding.weight", *keys):
        assert not torch.equal(state[key], before[key]), key
    # The task embeddings are each task's own, not shared parameters to combine.
    assert all(
        p is not learner.model.torso.task_embedding.weight
        for p in learner.model.shared_parameters()
    )
    fresh = _learner(kind, gradients)
    buf = io.BytesIO()  # through bytes, as a checkpoint (the state holds live tensors)
    torch.save(learner.state_dict(), buf)
    buf.seek(0)
    fresh.load_state_dict(torch.load(buf, weights_only=True))
    learner.update(batches)
    fresh.update(batches)
    for k, v in learner.model.state_dict().items():
        torch.testing.assert_close(fresh.model.state_dict()[k], v, rtol=0, atol=1e-7)


def test_a_bad_mixture_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(
            "tasks: [{env: a/b}]\nlearner: {model: {torso_mixture: {kind: switch}}}\n", "exp.yaml"
        )
    (line,) = err.value.problems
    assert "learner.model.torso_mixture.kind" in line and line.startswith("exp.yaml:"), line


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "algorithm, kind", [("impala", "moore"), ("sac", "moe"), ("impala", "soft_modular")]
)
def test_a_conditioned_torso_trains_end_to_end(algorithm: str, kind: str, tmp_path: Path) -> None:
    sac = (
        "sac: {learning_starts: 100, batch_size: 32, replay_ratio: 4},"
        if algorithm == "sac"
        else ""
    )
    cfg = parse_config(
        f"""
total_env_steps: 2000
tasks: [{{env: gymnasium/CartPole-v1, num_envs: 4}}, {{env: gymnasium/Acrobot-v1, num_envs: 4}}]
actors: {{mode: serial}}
learner: {{algorithm: {algorithm}, unroll_length: 10, batch_size: 8, {sac}
          model: {{encoder_dim: 16, torso: [16, 16], torso_mixture: {{kind: {kind}}}}}}}
tracking: {{console: quiet, csv: false, wandb: {{mode: disabled}}, final_eval_episodes: 2,
           run_dir: {tmp_path}, log_every_s: 0.5}}
"""
    )
    trainer = Trainer(cfg, console=False)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    assert result.env_steps >= 2000 and result.updates > 10
    (run_dir,) = tmp_path.iterdir()
    last = [json.loads(x) for x in (run_dir / "metrics.jsonl").open()][-1]
    assert all(np.isfinite(v) for k, v in last.items() if k.startswith("losses/"))
    # The actors acted, and the greedy eval played, through the conditioned torso.
    assert isinstance(last["eval/gymnasium/CartPole-v1/greedy_return"], float)
