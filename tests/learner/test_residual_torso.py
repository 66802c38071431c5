"""The residual torso (``learner.model.torso_block: residual``, BRO's BroNet): its shapes, the
configs it refuses (one line each, naming ``learner.model.torso``), each block is its input
plus a layer-normalised branch, every parameter learns and is shared, and IMPALA's model and
SAC's learner train it on two tasks of different spaces."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.algorithms.sac import make_sac_learner
from mtrl.config import LearnerConfig, parse_config
from mtrl.errors import ConfigError
from mtrl.learner.model import MultiTaskModel
from mtrl.learner.residual import ResidualBlock, ResidualTorso
from mtrl.learner.stacked import stack_signature
from mtrl.learner.torsos import make_torso
from tests.two_task_batches import SPACES, two_task_batch


def _model_config(**model: object) -> LearnerConfig:
    return LearnerConfig.model_validate(
        {"model": {"encoder_dim": 12, "torso": [16, 16, 16], "torso_block": "residual", **model}}
    )


def test_a_residual_torso_maps_any_batch_to_its_width_with_a_block_per_torso_width() -> None:
    torch.manual_seed(0)
    torso = make_torso(_model_config().model, num_tasks=2)
    assert isinstance(torso, ResidualTorso) and len(torso.blocks) == 3
    assert torso(torch.randn(5, 7, 12)).shape == (5, 7, 16)
    assert torso(torch.randn(3, 12)).shape == (3, 16)
    # Not a stack of plain layers: SAC's stacked step runs each critic's torso on its own.
    assert stack_signature(torso) is None
    # The plain MLP stays the default.
    plain = make_torso(LearnerConfig().model, num_tasks=2)
    assert not any(isinstance(m, nn.LayerNorm) for m in plain.modules())


@pytest.mark.parametrize(
    "model, says",
    [
        ("torso: [32, 16]", "needs one or more equal widths, got [32, 16]"),
        ("torso: []", "needs one or more equal widths, got []"),
        ("torso: [16], torso_mixture: {kind: moe}", "torso_mixture do not compose"),
    ],
)
def test_a_residual_torso_it_cannot_build_is_refused_in_one_line(model: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(
            f"tasks: [{{env: a/b}}]\nlearner: {{model: {{torso_block: residual, {model}}}}}\n",
            "exp.yaml",
        )
    (line,) = err.value.problems
    assert "learner.model.torso:" in line and says in line, line


def test_a_block_is_its_input_plus_a_layer_normalised_branch() -> None:
    torch.manual_seed(1)
    block = ResidualBlock(10, "relu")
    x = 3.0 * torch.randn(6, 10) + 2.0
    branch = block.branch(x)
    # Fresh layer norms (weight 1, bias 0): each row of the branch has mean 0 and variance 1,
    # whatever the scale of the input.
    torch.testing.assert_close(branch.mean(-1), torch.zeros(6), atol=1e-5, rtol=0)
    torch.testing.assert_close(branch.var(-1, unbiased=False), torch.ones(6), atol=1e-3, rtol=0)
    torch.testing.assert_close(block(x), x + branch)
    # A branch whose last layer norm outputs zero leaves the skip: the identity.
    with torch.no_grad():
        block.branch[-1].weight.zero_()
        block.branch[-1].bias.zero_()
    torch.testing.assert_close(block(x), x, rtol=0, atol=0)


def test_the_stem_normalises_before_its_activation() -> None:
    torch.manual_seed(2)
    torso = ResidualTorso(4, 8, blocks=0, activation="relu")
    x = 100.0 * torch.randn(5, 4)
    normed = nn.functional.layer_norm(torso.stem[0](x), (8,))
    torch.testing.assert_close(torso(x), torch.relu(normed), atol=1e-5, rtol=1e-5)


def test_gradients_reach_every_parameter_and_all_of_them_are_shared() -> None:
    torch.manual_seed(3)
    cfg = _model_config()
    model = MultiTaskModel(SPACES, cfg.model)
    x = torch.randn(9, 12)
    (model.run_torso(x, 0) * torch.randn(9, 16)).sum().backward()
    named = dict(model.torso.named_parameters())
    assert any(".branch.1." in k for k in named) and any("stem.1." in k for k in named)
    for name, p in named.items():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    shared = {id(p) for p in model.shared_parameters()}
    assert shared == {id(p) for p in model.torso.parameters()}


@pytest.mark.parametrize("gradients", ["sum", "pcgrad"])
def test_impala_trains_a_residual_torso_on_two_tasks(gradients: str) -> None:
    torch.manual_seed(0)
    cfg = LearnerConfig.model_validate(
        {
            "model": {"encoder_dim": 16, "torso": [16, 16], "torso_block": "residual"},
            "multitask": {"gradients": gradients},
        }
    )
    learner = ImpalaLearner(MultiTaskModel(SPACES, cfg.model), cfg, ["a", "b"])
    before = {k: v.clone() for k, v in learner.model.torso.state_dict().items()}
    metrics = learner.update([two_task_batch(0, 1.0, 10), two_task_batch(1, 30.0, 110)])
    assert np.isfinite(metrics["losses/total"])
    for key, value in learner.model.torso.state_dict().items():
        assert not torch.equal(value, before[key]), key


def test_sac_trains_residual_torsos_in_its_policy_and_both_critics() -> None:
    cfg = parse_config(
        "tasks: [{env: a/b}]\n"
        "learner: {algorithm: sac, unroll_length: 6, "
        "model: {encoder_dim: 16, torso: [16, 16], torso_block: residual}, "
        "sac: {replay_ratio: 8, batch_size: 16, learning_starts: 1}}\n"
    )
    torch.manual_seed(0)
    learner = make_sac_learner(MultiTaskModel(SPACES, cfg.learner.model), cfg.learner, ["a", "b"])
    torsos = {
        "policy": learner.model.torso,
        "q1": learner.critic.q1.torso,
        "q2": learner.critic.q2.torso,
    }
    assert all(isinstance(t, ResidualTorso) for t in torsos.values())
    before = {n: {k: v.clone() for k, v in t.state_dict().items()} for n, t in torsos.items()}
    metrics = learner.update([two_task_batch(0, 1.0, 10), two_task_batch(1, 30.0, 110)])
    assert learner.gradient_steps > 0
    assert all(np.isfinite(v) for k, v in metrics.items() if k.startswith("losses/"))
    for name, torso in torsos.items():
        for key, value in torso.state_dict().items():
            assert not torch.equal(value, before[name][key]), f"{name}.{key}"
    # The target critics follow their critics' residual torsos.
    assert isinstance(learner.target.q1.torso, ResidualTorso)
