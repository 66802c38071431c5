"""IMPALA's loss as a pure function: each sum against a hand computation, reset steps left
out, the weights applied where the docstring says, and gradients only where they belong."""

from __future__ import annotations

import pytest
import torch

from mtrl.algorithms.impala.loss import LossInputs, LossSums, loss, task_loss_sums


def _inputs(requires_grad: bool = False) -> LossInputs:
    logp = torch.tensor([[-0.5, -1.0], [-2.0, -0.1]], requires_grad=requires_grad)
    value = torch.tensor([[0.2, 0.4], [1.0, -0.5]], requires_grad=requires_grad)
    entropy = torch.tensor([[0.7, 0.6], [0.5, 0.4]], requires_grad=requires_grad)
    return LossInputs(
        logp=logp,
        advantages=torch.tensor([[1.0, -2.0], [0.5, 3.0]]),
        value=value,
        target=torch.tensor([[0.0, 1.0], [1.0, 0.5]]),
        entropy=entropy,
        valid=torch.tensor([[True, True], [True, False]]),  # the last step is a reset
    )


def test_each_sum_is_the_hand_computed_one_over_valid_steps() -> None:
    s = task_loss_sums(_inputs(), 2.0, torch.tensor(0.25), torch.tensor(0.1))
    pg = -((-0.5 * 1.0) + (-1.0 * -2.0) + (-2.0 * 0.5))
    v = 0.5 * (0.2**2 + 0.6**2 + 0.0**2)
    ent = 0.7 + 0.6 + 0.5
    assert float(s.policy) == pytest.approx(pg * 2.0)
    assert float(s.value) == pytest.approx(v * 2.0 * 0.25)
    assert float(s.entropy) == pytest.approx(ent * 2.0)
    assert float(s.bonus) == pytest.approx(ent * 2.0 * 0.1)


def test_the_loss_combines_the_sums_per_valid_step() -> None:
    s = LossSums(*(torch.tensor(x) for x in (3.0, 4.0, 5.0, 2.0)))
    assert float(loss(s, 4, 0.5, 0.01)) == pytest.approx((3.0 + 0.5 * 4.0 - 0.01 * 2.0) / 4)
    assert float(loss(s, 0, 0.5, 0.01)) == pytest.approx(3.0 + 2.0 - 0.02)  # never / 0
    both = s + s
    assert both.as_tensor().tolist() == [6.0, 8.0, 10.0, 4.0]


def test_gradients_reach_the_policy_value_and_entropy_only_on_valid_steps() -> None:
    x = _inputs(requires_grad=True)
    s = task_loss_sums(x, 1.0, torch.tensor(1.0), torch.tensor(1.0))
    loss(s, 1, 1.0, 1.0).backward()
    assert x.logp.grad.tolist() == [[-1.0, 2.0], [-0.5, 0.0]]  # −A, none on the reset step
    assert torch.allclose(x.value.grad, torch.tensor([[0.2, -0.6], [0.0, 0.0]]))  # n − ŷ
    # Only the bonus enters the loss (the entropy sum is reported): −bonus_unit · bonus weight.
    assert x.entropy.grad.tolist() == [[-1.0, -1.0], [-1.0, 0.0]]
