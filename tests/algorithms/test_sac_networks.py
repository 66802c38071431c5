"""Where a ``Box`` task's action enters SAC's critic (``learner.sac.critic_action``): with the
observation at the critic's input where the observation is a vector, after the encoder where it
is not (or where the config says ``hidden``); a Discrete task's critic reads no action."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from mtrl.algorithms.sac.networks import ActionJoin, CriticInput, MultiTaskCritic
from mtrl.config.learner import ModelConfig
from mtrl.config.multitask import TorsoMixtureConfig
from mtrl.learner.encoders import VectorWithExtra, make_encoder

VECTOR = spaces.Box(-1, 1, (5,), np.float32)
COUNTS = spaces.Box(0, 10, (2, 3), np.int64)  # a flat vector once scaled by 1/high
IMAGE = spaces.Box(0, 255, (3, 36, 36), np.uint8)
BOX_ACT = spaces.Box(-2, 2, (2,), np.float32)
CFG = ModelConfig(encoder_dim=16, torso=[16])


def _critic(action_at: str) -> MultiTaskCritic:
    torch.manual_seed(0)
    obs = [VECTOR, COUNTS, IMAGE, VECTOR]
    acts = [BOX_ACT, BOX_ACT, BOX_ACT, spaces.Discrete(3)]
    return MultiTaskCritic(acts, obs, CFG, action_at)


def test_input_puts_the_action_beside_a_vector_observation_and_after_an_image_encoder() -> None:
    critic = _critic("input")
    assert critic.action_at_input == [True, True, False, False]
    first = critic.encoders[0].mlp[0]
    assert isinstance(critic.encoders[0], VectorWithExtra)
    assert first.in_features == 5 + 2
    assert critic.encoders[1].mlp[0].in_features == 6 + 2
    assert isinstance(critic.joins[2], ActionJoin)
    assert isinstance(critic.joins[3], nn.Identity)


def test_hidden_joins_every_box_action_after_the_encoder() -> None:
    critic = _critic("hidden")
    assert critic.action_at_input == [False] * 4
    assert [type(j) for j in critic.joins] == [ActionJoin, ActionJoin, ActionJoin, nn.Identity]


@pytest.mark.parametrize("action_at", ["input", "hidden"])
def test_every_task_gets_q_of_its_shape_and_a_box_q_moves_with_the_action(action_at) -> None:
    critic = _critic(action_at)
    n = 4
    obs = [
        torch.rand(n, 5) * 2 - 1,
        torch.randint(0, 11, (n, 2, 3)),
        torch.randint(0, 256, (n, 3, 36, 36), dtype=torch.uint8),
        torch.rand(n, 5),
    ]
    a = torch.rand(n, 2) * 2 - 1
    inputs = [CriticInput(k, o, a if k < 3 else None) for k, o in enumerate(obs)]
    out = critic(inputs)
    assert [tuple(q.shape) for q in out] == [(n,), (n,), (n,), (n, 3)]
    moved = critic([CriticInput(k, o, -a if k < 3 else None) for k, o in enumerate(obs)])
    for k in range(3):
        assert not torch.allclose(out[k], moved[k]), f"task {k}'s Q ignores its action"
    torch.testing.assert_close(out[3], moved[3])


def test_a_vector_with_the_action_is_scaled_as_the_policy_encoder_scales_it() -> None:
    """Integer counts are read as ``count / high`` on both sides, so the critic and policy
    see one observation; with zero extra columns the two encoders are the same function."""
    torch.manual_seed(0)
    joint = VectorWithExtra(COUNTS, 0, CFG, "critic")
    plain = make_encoder(COUNTS, CFG, "policy")
    for p, q in zip(plain.mlp.parameters(), joint.mlp.parameters(), strict=True):
        p.data.copy_(q.data)
    obs = torch.randint(0, 11, (7, 2, 3))
    torch.testing.assert_close(joint(obs, torch.zeros(7, 0)), plain(obs))
    batched = joint(obs.reshape(7, 1, 2, 3), torch.zeros(7, 1, 0))
    assert batched.shape == (7, 1, 16)


@pytest.mark.parametrize("kind", ["moe", "soft_modular"])
def test_a_task_conditioned_torso_conditions_the_critic_on_each_rows_task(kind: str) -> None:
    """``learner.model.torso_mixture`` is the critic's torso too (soft modularization
    conditions the Q network as well as the policy): the same observation and action get a
    different Q in another task's slot only through that task's embedding, and the
    parameters combined across tasks leave the embedding out."""
    cfg = ModelConfig(
        encoder_dim=16,
        torso=[16, 16],
        torso_mixture=TorsoMixtureConfig(kind=kind, experts=3, task_embedding=4),
    )
    torch.manual_seed(0)
    critic = MultiTaskCritic([BOX_ACT] * 3, [VECTOR] * 3, cfg, "input")
    assert critic.conditioned
    # Give every task the same encoder, so the tasks differ only in the torso's embedding.
    for k in (1, 2):
        critic.encoders[k].load_state_dict(critic.encoders[0].state_dict())
        critic.heads[k].load_state_dict(critic.heads[0].state_dict())
    obs, a = torch.rand(5, 5) * 2 - 1, torch.rand(5, 2) * 2 - 1
    q0, q1, q2 = critic([CriticInput(k, obs, a) for k in range(3)])
    assert not torch.allclose(q0, q1) and not torch.allclose(q1, q2)
    with torch.no_grad():
        critic.torso.task_embedding.weight[1] = critic.torso.task_embedding.weight[0]
    q0, q1, _ = critic([CriticInput(k, obs, a) for k in range(3)])
    torch.testing.assert_close(q0, q1)
    q2.sum().backward()
    grad = critic.torso.task_embedding.weight.grad
    assert grad[2].abs().sum() > 0 and grad[0].abs().sum() == 0 and grad[1].abs().sum() == 0
    shared = {id(p) for p in critic.shared_parameters()}
    assert id(critic.torso.task_embedding.weight) not in shared
    assert shared == {
        id(p) for n, p in critic.torso.named_parameters() if not n.startswith("task_embedding")
    }
