"""Tests for mtrl.learner.model and encoders: shapes, gradient routing, task isolation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.config.learner import ModelConfig
from mtrl.learner.encoders import make_encoder
from mtrl.learner.model import MultiTaskModel, TaskSpaces, obs_to_tensor
from mtrl.learner.popart import preserve_outputs

CFG = ModelConfig(encoder_dim=16, torso=[32, 24])

ACTIONS = {
    "discrete": spaces.Discrete(4),
    "multidiscrete": spaces.MultiDiscrete([3, 5]),
    "box": spaces.Box(-2.0, 3.0, (2,), np.float32),
}
MASK_SIZE = {"discrete": 4, "multidiscrete": 8}


def _obs_space(kind: str, action: str) -> spaces.Space:
    if kind == "vector":
        return spaces.Box(-np.inf, np.inf, (6,), np.float64)
    if kind == "atari":
        return spaces.Box(0, 255, (4, 84, 84), np.uint8)
    if kind == "minatar":
        return spaces.Box(0, 1, (4, 10, 10), np.uint8)
    if kind == "discrete":
        return spaces.Discrete(7, start=2)
    parts = {"pos": spaces.Box(-1.0, 1.0, (3,), np.float32), "cell": spaces.Discrete(5)}
    if kind == "dict_masked":
        parts["action_mask"] = spaces.Box(0, 1, (MASK_SIZE[action],), np.int8)
    return spaces.Dict(parts)


def _batch(space: spaces.Space, shape: tuple[int, ...], seed: int = 0):
    """Random observations of ``space`` with leading ``shape``, as tensors of the env's dtype."""
    if isinstance(space, spaces.Dict):
        return {k: _batch(s, shape, seed + i) for i, (k, s) in enumerate(space.spaces.items())}
    space.seed(seed)
    n = int(np.prod(shape))
    arr = np.stack([space.sample() for _ in range(n)]).reshape(*shape, *space.shape)
    return obs_to_tensor(arr)


def _combos():
    for obs in ("vector", "atari", "minatar", "discrete", "dict", "dict_masked"):
        for act in ACTIONS:
            if not (obs == "dict_masked" and act == "box"):
                yield obs, act


COMBOS = list(_combos())


def _model(obs: str, act: str, seed: int = 0) -> tuple[MultiTaskModel, TaskSpaces]:
    """Task 1 is the one under test; tasks 0 and 2 are distractors (2 has the same spaces)."""
    torch.manual_seed(seed)
    spec = TaskSpaces(_obs_space(obs, act), ACTIONS[act])
    other = TaskSpaces(spaces.Box(-1.0, 1.0, (3,), np.float32), spaces.Discrete(2))
    return MultiTaskModel([other, spec, spec], CFG), spec


@pytest.mark.parametrize("obs,act", COMBOS)
@pytest.mark.parametrize("batch", [(5,), (3, 5)])
def test_forward_shapes_and_finite_log_prob(obs, act, batch):
    model, spec = _model(obs, act)
    x = _batch(spec.observation_space, batch)
    dist, value = model(1, x)
    actions = dist.sample()
    act_shape = spec.action_space.shape
    assert actions.shape == (*batch, *act_shape)
    assert dist.mode().shape == actions.shape
    assert value.shape == batch and value.dtype == torch.float32
    assert dist.log_prob(actions).shape == batch and dist.entropy().shape == batch
    assert torch.isfinite(dist.log_prob(actions)).all()
    assert model.embed(1, x).shape == (*batch, 24)
    if act != "box":
        assert spec.action_space.contains(np.asarray(actions.reshape(-1, *act_shape)[0]))


def _grad_norm(params) -> float:
    return sum(0.0 if p.grad is None else float(p.grad.abs().sum()) for p in params)


@pytest.mark.parametrize("obs,act", COMBOS)
def test_gradients_reach_only_the_task_and_the_torso(obs, act):
    model, spec = _model(obs, act)
    dist, value = model(1, _batch(spec.observation_space, (3, 5)))
    actions = dist.sample()
    (dist.log_prob(actions).sum() + dist.entropy().sum() + value.sum()).backward()
    for name, module in [("encoder", model.encoders[1]), ("head", model.policy_heads[1])]:
        for pname, p in module.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, f"{name}.{pname} got no grad"
    for pname, p in model.torso.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, f"torso.{pname} got no grad"
    assert model.value_weight.grad[1].abs().sum() > 0 and model.value_bias.grad[1] != 0
    assert _grad_norm(model.encoders[0].parameters()) == 0
    assert _grad_norm(model.encoders[2].parameters()) == 0
    assert _grad_norm(model.policy_heads[0].parameters()) == 0
    assert _grad_norm(model.policy_heads[2].parameters()) == 0
    assert model.value_weight.grad[[0, 2]].abs().sum() == 0
    assert model.value_bias.grad[[0, 2]].abs().sum() == 0


def test_dict_mask_with_box_actions_is_rejected():
    space = spaces.Dict({"x": spaces.Box(-1, 1, (2,)), "action_mask": spaces.MultiBinary(2)})
    with pytest.raises(ValueError, match=r"task 0.*action_mask"):
        MultiTaskModel([TaskSpaces(space, spaces.Box(-1, 1, (2,)))], CFG)


def test_mask_reaches_the_policy():
    model, spec = _model("dict_masked", "discrete")
    x = _batch(spec.observation_space, (2_000,))
    x["action_mask"] = torch.tensor([0, 0, 1, 0], dtype=torch.int8).expand(2_000, 4)
    dist, _ = model(1, x)
    assert torch.all(dist.sample() == 2) and torch.all(dist.mode() == 2)


def test_policy_from_features_matches_forward_and_needs_the_mask():
    model, spec = _model("dict_masked", "multidiscrete")
    x = _batch(spec.observation_space, (4, 3))
    dist, _ = model(1, x)
    h = model.embed(1, x)
    actions = dist.sample()
    sliced = model.policy(1, h[:-1], model.action_mask(1, x)[:-1])
    torch.testing.assert_close(sliced.log_prob(actions[:-1]), dist.log_prob(actions)[:-1])
    with pytest.raises(ValueError, match="action_mask"):
        model.policy(1, h)
    assert model.action_mask(0, x) is None and not model.has_action_mask(0)


def test_tasks_are_isolated_in_a_mixed_model():
    torch.manual_seed(0)
    tasks = [
        TaskSpaces(spaces.Box(0, 255, (4, 84, 84), np.uint8), spaces.Discrete(6)),
        TaskSpaces(spaces.Box(-np.inf, np.inf, (5,), np.float32), spaces.Box(-1, 1, (3,))),
        TaskSpaces(_obs_space("dict_masked", "multidiscrete"), ACTIONS["multidiscrete"]),
    ]
    model = MultiTaskModel(tasks, CFG)
    x = _batch(tasks[1].observation_space, (4, 6))
    dist, value = model(1, x)
    with torch.no_grad():
        for module in (model.encoders[0], model.policy_heads[0], model.encoders[2]):
            for p in module.parameters():
                p.add_(torch.randn_like(p))
        model.value_weight[0].add_(1.0)
    dist2, value2 = model(1, x)
    assert torch.equal(dist.mean, dist2.mean) and torch.equal(value, value2)
    with torch.no_grad():  # the check can fail: the shared torso does change task 1
        model.torso[0].weight.add_(torch.randn_like(model.torso[0].weight))
    _, value3 = model(1, x)
    assert not torch.equal(value, value3)


def test_uint8_frames_are_scaled_by_the_space_high():
    x = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    enc_u8 = make_encoder(spaces.Box(0, 255, (4, 84, 84), np.uint8), CFG)
    enc_f = make_encoder(spaces.Box(0.0, 1.0, (4, 84, 84), np.float32), CFG)
    enc_f.load_state_dict(enc_u8.state_dict())
    torch.testing.assert_close(enc_u8(x), enc_f(x.float() / 255))
    assert sum(isinstance(m, torch.nn.Conv2d) for m in enc_u8.modules()) == 3  # Nature CNN
    bits = torch.randint(0, 2, (2, 4, 10, 10), dtype=torch.uint8)
    enc_b = make_encoder(spaces.Box(0, 1, (4, 10, 10), np.uint8), CFG)
    enc_bf = make_encoder(spaces.Box(0.0, 1.0, (4, 10, 10), np.float32), CFG)
    enc_bf.load_state_dict(enc_b.state_dict())
    torch.testing.assert_close(enc_b(bits), enc_bf(bits.float()))
    assert sum(isinstance(m, torch.nn.Conv2d) for m in enc_b.modules()) == 1  # MinAtar conv


def test_channels_last_small_frames_are_transposed():
    chw = make_encoder(spaces.Box(0, 1, (4, 10, 10), np.uint8), CFG)
    hwc = make_encoder(spaces.Box(0, 1, (10, 10, 4), np.uint8), CFG)
    hwc.load_state_dict(chw.state_dict())
    x = torch.randint(0, 2, (3, 4, 10, 10), dtype=torch.uint8)
    torch.testing.assert_close(hwc(x.permute(0, 2, 3, 1)), chw(x))


def test_wrong_observation_shape_names_the_task():
    model, _ = _model("vector", "discrete")
    with pytest.raises(ValueError, match=r"task 1 encoder.*\(6,\)"):
        model(1, torch.zeros(5, 7))
    with pytest.raises(IndexError, match="3 tasks"):
        model(3, torch.zeros(5, 6))


def test_obs_to_tensor_keeps_dtypes():
    out = obs_to_tensor({"a": np.zeros((2, 3), np.uint8), "b": np.zeros(2, np.int64)})
    assert out["a"].dtype == torch.uint8 and out["b"].dtype == torch.int64


def test_value_head_works_with_popart_preserve_outputs():
    model, spec = _model("vector", "box")
    x = _batch(spec.observation_space, (8,))
    mu_old, sig_old = torch.zeros(3), torch.ones(3)
    mu_new, sig_new = torch.tensor([1.0, -2.0, 3.0]), torch.tensor([2.0, 0.5, 4.0])
    with torch.no_grad():
        before = model(1, x)[1] * sig_old[1] + mu_old[1]
        w, b = preserve_outputs(
            model.value_weight, model.value_bias, mu_old, sig_old, mu_new, sig_new
        )
        model.value_weight.copy_(w)
        model.value_bias.copy_(b)
        after = model(1, x)[1] * sig_new[1] + mu_new[1]
    torch.testing.assert_close(after, before)


def test_value_head_fits_a_constant_target():
    model, spec = _model("vector", "discrete")
    x = _batch(spec.observation_space, (64,))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(300):
        loss = (model(1, x)[1] - 3.0).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-2  # from ≈ 9 at init


def test_orthogonal_init_conventions():
    model, _ = _model("vector", "discrete")
    torch.testing.assert_close(model.value_weight.norm(dim=1), torch.ones(3))
    assert torch.all(model.value_bias == 0)
    logits = model.policy_heads[1].linear
    assert torch.all(logits.bias == 0) and logits.weight.norm(dim=1).max() < 0.011
    assert torch.all(model.torso[0].bias == 0)
