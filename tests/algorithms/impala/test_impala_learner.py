"""The learner's update: PopArt wiring, masking of reset steps, and a mixed-task batch."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.config import LearnerConfig
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel
from tests.two_task_batches import SPACES, N, T, two_task_batch


def _learner(**kw: object) -> ImpalaLearner:
    torch.manual_seed(0)
    cfg = LearnerConfig.model_validate({"model": {"encoder_dim": 16, "torso": [16]}, **kw})
    return ImpalaLearner(MultiTaskModel(SPACES, cfg.model), cfg, ["a", "b"])


def _unnormalised_values(learner: ImpalaLearner, batches: list[TaskBatch]) -> list[torch.Tensor]:
    out = []
    with torch.no_grad():
        for b in batches:
            h = learner.model.embed(b.task, b.obs)
            n = h @ learner.model.value_weight[b.task] + learner.model.value_bias[b.task]
            out.append(n.double() * learner.sigma[b.task] + learner.mu[b.task])
    return out


def _normalised_head(learner: ImpalaLearner) -> tuple[torch.Tensor, torch.Tensor]:
    return learner.model.value_weight.detach().clone(), learner.model.value_bias.detach().clone()


@pytest.mark.parametrize("first_batch_init", [True, False])
def test_popart_moves_statistics_and_preserves_outputs_exactly(first_batch_init: bool) -> None:
    learner = _learner(
        learning_rate=1e-12, popart={"beta": 0.5, "init_from_first_batch": first_batch_init}
    )
    batches = [two_task_batch(0, 1.0, 1), two_task_batch(1, 1000.0, 2)]
    if first_batch_init:
        learner.update(batches)  # the first batch sets the statistics; see the test below
    before = _unnormalised_values(learner, batches)
    learner.update(batches)
    after = _unnormalised_values(learner, batches)
    assert learner.sigma[1] > 50 * learner.sigma[0]  # the 1000x-reward task got a larger scale
    for b, a in zip(before, after, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_first_batch_of_a_task_sets_its_statistics_and_keeps_its_normalised_head() -> None:
    learner = _learner(learning_rate=1e-12, popart={"beta": 3e-4})
    w0, b0 = _normalised_head(learner)
    learner.update([two_task_batch(1, 1000.0, 2)])  # task 0 not in this batch
    w1, b1 = _normalised_head(learner)
    assert learner.popart_seen.tolist() == [False, True]
    # Task 1 took its targets' statistics outright (β = 1, not 3e-4 from μ=0, ν=1): rewards
    # ~1000·N(0,1) give a σ of hundreds, not ~1.
    assert learner.sigma[1] > 100
    # Normalised outputs kept (up to the 1e-12 learning-rate step).
    torch.testing.assert_close((w1[1], b1[1]), (w0[1], b0[1]), rtol=0, atol=1e-9)
    # Task 0 is untouched: still the prior, head unchanged.
    assert learner.mu[0].item() == 0.0 and learner.nu[0].item() == 1.0
    torch.testing.assert_close((w1[0], b1[0]), (w0[0], b0[0]), rtol=0, atol=1e-9)
    # Later updates of task 1 are ordinary PopArt steps: unnormalised outputs preserved.
    batches = [two_task_batch(0, 1.0, 1), two_task_batch(1, 1000.0, 3)]
    before = _unnormalised_values(learner, batches[1:])
    learner.update(batches)
    torch.testing.assert_close(
        _unnormalised_values(learner, batches[1:]), before, rtol=1e-4, atol=1e-3
    )
    assert learner.popart_seen.tolist() == [True, True]


def test_popart_seen_survives_a_checkpoint_and_old_checkpoints_load() -> None:
    learner = _learner()
    learner.update([two_task_batch(1, 1.0, 2)])
    state = learner.state_dict()
    fresh = _learner()
    fresh.load_state_dict(state)
    assert fresh.popart_seen.tolist() == [False, True]
    old = {k: v for k, v in state.items() if k != "popart_seen"}  # saved before the field existed
    fresh.load_state_dict(old)
    assert fresh.popart_seen.tolist() == [True, True]  # a trained learner: statistics are live


def test_without_popart_statistics_stay_put() -> None:
    learner = _learner(popart={"enabled": False})
    metrics = learner.update([two_task_batch(0, 1.0, 1), two_task_batch(1, 1000.0, 2)])
    assert float(learner.mu.abs().sum()) == 0.0
    assert not any(k.startswith("popart/") for k in metrics)


def test_update_counts_only_valid_steps_and_reports_lag() -> None:
    learner = _learner()
    batches = [two_task_batch(0, 1.0, 1), two_task_batch(1, 1.0, 2)]
    metrics = learner.update(batches)
    assert metrics["charts/learner_samples"] == sum(b.num_samples for b in batches)
    assert metrics["charts/policy_lag"] == 0
    metrics = learner.update(batches)  # same (now one version old) data
    assert metrics["charts/policy_lag"] == 1
    assert learner.version == 2


@pytest.mark.parametrize("end", ["terminated", "truncated"])
def test_reset_steps_do_not_affect_the_gradient(end: str) -> None:
    """An episode ends at t=1 in column 1, so t=2 is a reset step: its reward must not leak."""
    b = two_task_batch(0, 1.0, 3)
    grads = []
    for poison in (0.0, 1e6):
        learner = _learner(learning_rate=1e-3)
        bb = TaskBatch(**{**b.__dict__})
        bb.terminated = torch.zeros_like(b.terminated)
        bb.truncated = torch.zeros_like(b.truncated)
        getattr(bb, end)[1, 1] = True
        bb.valid = torch.ones_like(b.valid)
        bb.valid[2, 1] = False
        bb.rewards = b.rewards.clone()
        bb.rewards[2, 1] = poison
        learner.update([bb])
        grads.append(torch.cat([p.detach().flatten() for p in learner.model.parameters()]))
    torch.testing.assert_close(grads[0], grads[1])


@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
def test_both_optimisers_step(optimizer: str) -> None:
    learner = _learner(optimizer=optimizer)
    before = [p.detach().clone() for p in learner.model.parameters()]
    learner.update([two_task_batch(0, 1.0, 1)])
    assert any(
        not torch.equal(a, p) for a, p in zip(before, learner.model.parameters(), strict=True)
    )


def test_loss_weight_scales_its_tasks_policy_value_and_entropy_terms() -> None:
    learner = _learner(popart={"enabled": False})
    b0, b1 = two_task_batch(0, 1.0, 1), two_task_batch(1, 1.0, 2)

    def sums(batches: list[TaskBatch]) -> torch.Tensor:
        with torch.no_grad():
            _, parts = learner._forward(batches)
            return learner._loss_sums(parts)[0].as_tensor()

    weighted = sums([b0, dataclasses.replace(b1, loss_weight=3.0)])
    torch.testing.assert_close(weighted, sums([b0]) + 3.0 * sums([b1]))


def _solved_task_batch(reward: float, noise: float, seed: int) -> TaskBatch:
    """Task 0 seeing one observation in every batch (its value is one number), rewards
    ``reward + noise·N(0, 1)``: with small noise, near-constant targets, as a solved task's."""
    g = torch.Generator().manual_seed(seed)
    b = two_task_batch(0, 1.0, seed)
    obs = torch.linspace(-1, 1, b.obs.shape[-1]).expand_as(b.obs).clone()
    rewards = reward + noise * torch.randn(T, N, generator=g)
    none = torch.zeros(T, N, dtype=torch.bool)
    return dataclasses.replace(
        b, obs=obs, rewards=rewards, terminated=none, valid=torch.ones(T, N, dtype=torch.bool)
    )


def _value_grad_into_torso(learner: ImpalaLearner, batch: TaskBatch) -> float:
    learner.model.zero_grad(set_to_none=True)
    _, parts = learner._forward([batch])
    learner._loss_sums(parts)[0].value.backward()
    return float(torch.cat([p.grad.flatten() for p in learner.model.torso.parameters()]).norm())


@pytest.mark.parametrize("shrink", [1.0, 1e-3])
def test_a_solved_tasks_value_gradient_does_not_grow_as_its_spread_collapses(
    shrink: float,
) -> None:
    """The model is frozen (learning rate 1e-12, γ = 1: every target is the one value plus the
    rewards' noise) while the targets' spread collapses from ~20 to ~0.02. Measured in σ
    (plain PopArt, ``value_scale_shrink: 1``) the value loss's gradient into the shared torso
    grows as σ falls (the head is rescaled by 1/σ); measured in the slowly falling value
    scale it does not grow."""
    popart = {"beta": 0.05, "value_scale_shrink": shrink}
    learner = _learner(learning_rate=1e-12, gamma=1.0, popart=popart)
    for i in range(100):  # learning: returns spread widely
        learner.update([_solved_task_batch(0.0, 10.0, i)])
    probe = _solved_task_batch(0.0, 0.01, 999)
    before, sigma_before = _value_grad_into_torso(learner, probe), float(learner.sigma[0])
    for i in range(300):  # solved: near-constant returns
        learner.update([_solved_task_batch(0.0, 0.01, 100 + i)])
    after, sigma_after = _value_grad_into_torso(learner, probe), float(learner.sigma[0])
    assert sigma_after < sigma_before / 100  # the spread did collapse
    if shrink == 1.0:
        assert after > 1e4 * before  # measured: ~10^6
    else:
        assert after < 3 * before  # measured 1.8x: (1 / 0.999^300)², the scale's own fall
        assert float(learner.value_scale[0]) > 0.7 * sigma_before  # 0.999^300 ≈ 0.74


def _policy_terms(learner: ImpalaLearner, batch: TaskBatch) -> tuple[float, float]:
    """The gradient norm of the policy-gradient term over the whole model, and the entropy
    bonus (its sum, boost and σ / scale included) — both as the loss counts them."""
    learner.model.zero_grad(set_to_none=True)
    _, parts = learner._forward([batch])
    sums, _ = learner._loss_sums(parts)
    pg, bonus = sums.policy, sums.bonus
    pg.backward()
    grads = [p.grad.flatten() for p in learner.model.parameters() if p.grad is not None]
    return float(torch.cat(grads).norm()), float(bonus.detach())


@pytest.mark.parametrize("shrink", [1.0, 1e-3])
def test_a_solved_tasks_policy_terms_do_not_grow_as_its_spread_collapses(shrink: float) -> None:
    """Frozen model, targets' spread collapsing from ~20 to ~0.02 as above. A solved task's
    advantages are noise of a fixed size in reward units: divided by σ (plain PopArt) its
    policy gradient grows as σ falls, so a solved policy random-walks at full strength;
    divided by the slowly falling value scale it does not grow, and the entropy bonus shrinks
    by σ / scale with it, keeping the balance of the two."""
    popart = {"beta": 0.05, "value_scale_shrink": shrink}
    learner = _learner(learning_rate=1e-12, gamma=1.0, popart=popart)
    for i in range(100):
        learner.update([_solved_task_batch(0.0, 10.0, i)])
    probe = _solved_task_batch(0.0, 0.01, 999)
    pg_before, bonus_before = _policy_terms(learner, probe)
    ratio_before = float(learner.sigma[0] / learner.value_scale[0])
    for i in range(300):
        learner.update([_solved_task_batch(0.0, 0.01, 100 + i)])
    pg_after, bonus_after = _policy_terms(learner, probe)
    ratio_after = float(learner.sigma[0] / learner.value_scale[0])
    if shrink == 1.0:
        assert pg_after > 100 * pg_before  # measured ~930x: σ fell ~1000-fold
        assert bonus_after == pytest.approx(bonus_before, rel=1e-4)
    else:
        assert pg_after < 1.5 * pg_before  # measured 1.35x: 1 / 0.999^300, the scale's fall
        assert ratio_after < ratio_before / 50
        assert bonus_after == pytest.approx(bonus_before * ratio_after / ratio_before, rel=1e-3)


def test_value_scale_survives_a_checkpoint_and_old_checkpoints_start_it_at_sigma() -> None:
    learner = _learner(popart={"beta": 0.5})
    for i in range(5):
        learner.update([_solved_task_batch(1.0, 10.0 if i < 2 else 0.01, i)])
    assert float(learner.value_scale[0]) > 2 * float(learner.sigma[0])
    fresh = _learner()
    fresh.load_state_dict(learner.state_dict())
    torch.testing.assert_close(fresh.value_scale, learner.value_scale)
    old = {k: v for k, v in learner.state_dict().items() if k != "value_scale"}
    fresh.load_state_dict(old)
    torch.testing.assert_close(fresh.value_scale, learner.sigma)


def _bandit_batch(learner: ImpalaLearner, better: float, seed: int) -> tuple[TaskBatch, float]:
    """Task 0 as a two-armed bandit played on-policy: action 1 pays 1, action 0 pays
    ``better``; every step is its own episode. Returns the batch and P(action 0)."""
    g = torch.Generator().manual_seed(seed)
    b = two_task_batch(0, 1.0, seed)
    obs = torch.linspace(-1, 1, b.obs.shape[-1]).expand_as(b.obs).clone()
    with torch.no_grad():
        dist = learner.model.policy(0, learner.model.embed(0, obs[:-1]))
        p0 = dist.log_probs[..., 0].exp()
        actions = (torch.rand(T, N, generator=g) >= p0).long()
        logp = dist.log_prob(actions)
    rewards = torch.where(actions == 1, 1.0, better)
    every = torch.ones(T, N, dtype=torch.bool)
    batch = dataclasses.replace(
        b, obs=obs, actions=actions, behaviour_logp=logp, rewards=rewards,
        terminated=every, valid=every,
    )  # fmt: skip
    return batch, float(p0.mean())


@pytest.mark.parametrize("floor", [0.0, 0.3])
def test_a_policy_turned_deterministic_early_recovers_only_with_the_entropy_floor(
    floor: float,
) -> None:
    """Early on action 1 is the better arm and the policy turns deterministic on it; then
    action 0 pays twice as much. Played on-policy, the deterministic policy never tries
    action 0: its value is exact, its advantages are 0 and the bonus's gradient has vanished
    with P(action 0) — without the floor it stays stuck. With it the bonus grows until action
    0 is tried again, and the policy moves to it."""
    learner = _learner(learning_rate=1e-2, entropy_floor=floor)
    for i in range(100):
        learner.update([_bandit_batch(learner, 0.0, i)[0]])
    assert _bandit_batch(learner, 0.0, 0)[1] < 1e-4  # deterministic on action 1
    for i in range(300):
        learner.update([_bandit_batch(learner, 2.0, 1000 + i)[0]])
    p0 = _bandit_batch(learner, 2.0, 0)[1]
    if floor == 0.0:
        assert p0 < 1e-4  # measured 2e-6: stuck
        assert float(learner.entropy_boost[0]) == 1.0
    else:
        assert p0 > 0.9  # measured 0.99999
    assert float(learner.entropy_boost[1]) == 1.0  # the Gaussian task: no floor


def test_entropy_boost_survives_a_checkpoint_and_old_checkpoints_start_it_at_one() -> None:
    learner = _learner(entropy_floor=0.25)
    learner.entropy_boost[0] = 7.0
    fresh = _learner(entropy_floor=0.25)
    fresh.load_state_dict(learner.state_dict())
    assert fresh.entropy_boost.tolist() == [7.0, 1.0]
    old = {k: v for k, v in learner.state_dict().items() if k != "entropy_boost"}
    fresh.load_state_dict(old)
    assert fresh.entropy_boost.tolist() == [1.0, 1.0]


def _saturated_bandit_batch(learner: ImpalaLearner, seed: int) -> tuple[TaskBatch, float]:
    """Task 1 (a Box in [-2, 2]², tanh-squashed) as a one-step bandit played on-policy: the
    env action ``a`` pays ``1 - |a| / 2`` per dim plus noise that does not depend on it (as
    an env's own randomness). Returns the batch and the fraction of saturated means."""
    g = torch.Generator().manual_seed(seed)
    b = two_task_batch(1, 1.0, seed)
    with torch.no_grad():
        dist = learner.model.policy(1, learner.model.embed(1, b.obs[:-1]))
        u = dist.mean + dist.log_std.exp() * torch.randn(T, N, 2, generator=g)
        logp = dist.log_prob(u)
        saturated = float((dist.mean.abs() > 2).float().mean())
    a = 2 * torch.tanh(u)
    rewards = (1 - a.abs() / 2).sum(-1) + torch.randn(T, N, generator=g)
    every = torch.ones(T, N, dtype=torch.bool)
    batch = dataclasses.replace(
        b, actions=u, behaviour_logp=logp, rewards=rewards, terminated=every, valid=every
    )
    return batch, saturated


@pytest.mark.parametrize("ceiling", [1.0, 0.1])
def test_a_saturated_gaussian_comes_back_only_with_the_saturation_ceiling(ceiling: float) -> None:
    """The Gaussian's mean starts deep in the flat end of the squash (pre-squash 4, where
    every sample is the same env action): the policy gradient is the reward noise only, and
    a Gaussian has no plain entropy bonus by default. With the ceiling (the default, 0.1)
    the extra bonus grows until the mean is back where actions differ, and the reward then
    brings it to 0."""
    learner = _learner(learning_rate=1e-3, saturation_ceiling=ceiling)
    head = learner.model.policy_heads[1]
    with torch.no_grad():
        head.mean.weight.zero_()
        head.mean.bias.fill_(4.0)
    head.set_log_std(-1.0)
    for i in range(200):
        learner.update([_saturated_bandit_batch(learner, i)[0]])
    saturated = _saturated_bandit_batch(learner, 10_000)[1]
    if ceiling == 1.0:
        assert saturated == 1.0  # measured: 1.0 for 300 updates
        assert float(learner.entropy_boost[1]) == 1.0
    else:
        assert saturated < 0.1  # measured: the boost reached 100x, saturated 1.0 → 0.0
    assert float(learner.entropy_boost[0]) == 1.0  # the discrete task: not in these batches


def _head_grads(**kw: object) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The discrete head's and the Gaussian head's gradients after one update on the same
    batches (a learning rate of ~0: the gradient is what differs, not the step), the Gaussian
    narrow (log-std −1, where its squashed entropy grows with the log-std) and its mean off
    the middle of the range (pre-squash 1.5)."""
    learner = _learner(learning_rate=1e-12, **kw)
    head = learner.model.policy_heads[1]
    head.set_log_std(-1.0)
    with torch.no_grad():
        head.mean.bias.fill_(1.5)
    learner.update([two_task_batch(0, 1.0, 7), two_task_batch(1, 1.0, 8)])
    return tuple(  # type: ignore[return-value]
        {n: p.grad.clone() for n, p in h.named_parameters()} for h in learner.model.policy_heads
    )


def test_a_gaussians_plain_entropy_bonus_has_its_own_weight_zero_by_default() -> None:
    """A squashed Gaussian's entropy bonus pulls every state's mean toward the middle of the
    action range and its log-std outward, whatever the returns (measured on
    InvertedPendulum: it kept the exploring policy from the bounds where full force is needed
    and the noise is squashed away, at 855–942 while the greedy one scored 1000). So its
    plain bonus has its own weight, ``gaussian_entropy_coef``, 0 by default as in PPO's MuJoCo
    settings; ``entropy_coef`` weights the discrete head's only. Changing one leaves the
    other head's gradient exactly as it was."""
    base_d, base_g = _head_grads()
    no_discrete_d, no_discrete_g = _head_grads(entropy_coef=0.0)
    with_gauss_d, with_gauss_g = _head_grads(gaussian_entropy_coef=0.05)
    for name in base_g:
        torch.testing.assert_close(base_g[name], no_discrete_g[name], rtol=0, atol=0)
    assert any(not torch.equal(base_d[n], no_discrete_d[n]) for n in base_d)
    for name in base_d:
        torch.testing.assert_close(base_d[name], with_gauss_d[name], rtol=0, atol=0)
    # The bonus widens the Gaussian (the loss falls as its log-std grows) and pulls its mean
    # back toward the middle (the loss rises with the mean, at pre-squash 1.5).
    assert (with_gauss_g["log_std_param"] < base_g["log_std_param"]).all()
    assert (with_gauss_g["mean.bias"] > base_g["mean.bias"]).all()


@pytest.mark.parametrize("kw", [{}, {"gaussian_entropy_coef": 0.05}])
def test_the_logged_total_loss_is_the_loss_that_was_minimised(
    monkeypatch: pytest.MonkeyPatch, kw: dict[str, float]
) -> None:
    """``losses/total`` is the scalar the optimiser stepped on: the entropy bonus counted with
    each task's own weight, σ / value scale and entropy boost, not ``entropy_coef`` times the
    entropy for every task (with a boost, a Gaussian's own weight or a scale ≠ σ those differ)."""
    learner = _learner(**kw)
    learner.boost.values[0] = 3.0  # a discrete task under its floor: its bonus boosted
    minimised: list[float] = []
    backward = torch.autograd.backward

    def spy(tensors: torch.Tensor, *args: object, **kwargs: object) -> None:
        minimised.append(float(tensors.detach()))
        backward(tensors, *args, **kwargs)

    monkeypatch.setattr(torch.autograd, "backward", spy)
    metrics = [
        learner.update([two_task_batch(0, 1.0, s), two_task_batch(1, 3.0, s + 1)]) for s in range(3)
    ]
    assert len(minimised) == 3
    for m, loss in zip(metrics, minimised, strict=True):
        assert m["losses/total"] == pytest.approx(loss, rel=1e-5, abs=1e-7)
    naive = [
        m["losses/policy"] + 0.5 * m["losses/value"] - 0.01 * m["losses/entropy"] for m in metrics
    ]
    assert any(abs(n - loss) > 1e-4 for n, loss in zip(naive, minimised, strict=True))
