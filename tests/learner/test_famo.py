"""FAMO's math (:mod:`mtrl.learner.famo`): the weights are a distribution, the model's step
direction is the gradient of FAMO's normalised log objective, the logit step is the softmax's
Jacobian applied to the change of the log losses (checked by hand on two tasks and against
autograd), and a task whose loss falls faster than the others' loses weight."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl.learner.famo import logit_gradient, loss_scales, task_weights

EPS = 1e-8
_logits = st.lists(st.floats(-6, 6), min_size=1, max_size=8)


@settings(max_examples=50, deadline=None)
@given(_logits)
def test_the_weights_are_a_distribution(values: list[float]) -> None:
    z = task_weights(torch.tensor(values, dtype=torch.float64))
    assert bool((z > 0).all())
    assert math.isclose(float(z.sum()), 1.0, abs_tol=1e-12)


@settings(max_examples=50, deadline=None)
@given(_logits, st.data())
def test_the_scales_are_the_gradient_of_the_normalised_log_objective(
    values: list[float], data: st.DataObject
) -> None:
    """``Σ_k m_k ∇ℓ_k`` is the gradient of ``c Σ_k z_k log(ℓ_k + ε)``, ``c`` held constant."""
    k = len(values)
    logits = torch.tensor(values, dtype=torch.float64)
    losses = torch.tensor(
        data.draw(st.lists(st.floats(1e-3, 1e3), min_size=k, max_size=k)),
        dtype=torch.float64,
        requires_grad=True,
    )
    present = torch.ones(k, dtype=torch.bool)
    z = torch.softmax(logits, -1)
    c = 1.0 / (z / (losses.detach() + EPS)).sum()
    (grad,) = torch.autograd.grad((c * z * (losses + EPS).log()).sum(), losses)
    scales = loss_scales(losses, logits, present, EPS)
    torch.testing.assert_close(scales, grad)
    # Normalised: a convex combination of the tasks' gradients, whatever the losses' scale.
    assert math.isclose(float(scales.sum()), 1.0, rel_tol=1e-9)


def test_a_task_absent_from_the_step_gets_no_scale_and_counts_as_unchanged() -> None:
    logits = torch.tensor([0.3, -0.2, 0.1])
    losses = torch.tensor([2.0, 50.0, 0.5])
    present = torch.tensor([True, False, True])
    scales = loss_scales(losses, logits, present, EPS)
    assert scales[1] == 0
    both = torch.ones(2, dtype=torch.bool)  # as if task 1 were not there
    torch.testing.assert_close(
        scales[[0, 2]], loss_scales(losses[[0, 2]], logits[[0, 2]], both, EPS)
    )
    after = torch.tensor([1.0, 1.0, 0.5])  # task 1's "change" is ignored
    g = logit_gradient(logits, losses, after, present, EPS)
    delta = torch.tensor([math.log(2.0), 0.0, 0.0])
    z = task_weights(logits)
    torch.testing.assert_close(g, z * (delta - (z * delta).sum()))


def test_the_logit_gradient_by_hand_on_two_tasks() -> None:
    """``ξ = 0`` (``z = ½, ½``); task 0's loss falls by a factor ``e``, task 1's stays:
    ``δ = (1, 0)``, ``z·δ = ½``, so the gradient is ``(½·½, ½·(−½)) = (¼, −¼)``."""
    logits = torch.zeros(2)
    before = torch.tensor([1.0, 3.0])
    after = torch.tensor([math.exp(-1.0), 3.0])
    g = logit_gradient(logits, before, after, torch.ones(2, dtype=torch.bool), 0.0)
    torch.testing.assert_close(g, torch.tensor([0.25, -0.25]))


@settings(max_examples=50, deadline=None)
@given(_logits, st.data())
def test_the_logit_gradient_is_the_softmax_jacobian_applied_to_the_log_change(
    values: list[float], data: st.DataObject
) -> None:
    k = len(values)
    logits = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    draw = st.lists(st.floats(1e-3, 1e3), min_size=k, max_size=k)
    before = torch.tensor(data.draw(draw), dtype=torch.float64)
    after = torch.tensor(data.draw(draw), dtype=torch.float64)
    delta = (before + EPS).log() - (after + EPS).log()
    (expected,) = torch.autograd.grad(torch.softmax(logits, -1), logits, grad_outputs=delta)
    got = logit_gradient(logits, before, after, torch.ones(k, dtype=torch.bool), EPS)
    torch.testing.assert_close(got, expected)


def test_a_task_whose_loss_falls_faster_loses_weight() -> None:
    """Three tasks stepped as FAMO steps its logits (Adam, weight decay): the task whose loss
    halves every step ends with the least weight, the one whose loss stays with the most."""
    logits = torch.zeros(3, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=0.025, weight_decay=0.01)
    losses = torch.tensor([1.0, 1.0, 1.0])
    rates = torch.tensor([0.5, 0.9, 1.0])
    present = torch.ones(3, dtype=torch.bool)
    for _ in range(20):
        after = losses * rates
        logits.grad = logit_gradient(logits, losses, after, present, EPS)
        opt.step()
        losses = after
    z = task_weights(logits.detach())
    assert float(z[0]) < float(z[1]) < float(z[2])
    assert float(z[0]) < 1 / 3 < float(z[2])
