"""The categorical critic (``learner.sac.critic: categorical``): the two-hot projection keeps a
target's value inside the support and its mass sums to 1; ``Q`` is the logits' expectation; a
learner with it regresses its critics' ``Q`` to the soft target, says once per task when the
targets pile up at an end of the support, resets and checkpoints it; a
support that is not an interval is refused in one line. The stacked step against the per-task
step with it: tests/algorithms/test_sac_stacked_step.py."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl.algorithms.sac import SacLearner, categorical, make_sac_learner, resets
from mtrl.config import parse_config
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from tests.refusals import refused_text

T, N = 8, 4
BOX = TaskSpaces(spaces.Box(-8, 8, (3,), np.float32), spaces.Box(-2, 2, (1,), np.float32))
CART = TaskSpaces(spaces.Box(-8, 8, (4,), np.float32), spaces.Discrete(3))


@settings(max_examples=200, deadline=None)
@given(
    v_min=st.floats(-1e3, 1e2),
    span=st.floats(1e-2, 1e3),
    bins=st.integers(2, 201),
    ys=st.lists(st.floats(-2e3, 2e3), min_size=1, max_size=20),
)
def test_two_hot_keeps_the_clipped_value_and_its_mass_sums_to_one(
    v_min: float, span: float, bins: int, ys: list[float]
) -> None:
    values = categorical.support(v_min, v_min + span, bins, dtype=torch.float64)
    y = torch.tensor(ys, dtype=torch.float64)
    probs = categorical.two_hot(y, values)
    assert probs.shape == (len(ys), bins)
    assert (probs >= 0).all()
    torch.testing.assert_close(probs.sum(-1), torch.ones(len(ys), dtype=torch.float64))
    assert ((probs > 0).sum(-1) <= 2).all()  # two neighbouring bins at most
    clipped = y.clamp(values[0], values[-1])
    torch.testing.assert_close(probs @ values, clipped, atol=1e-9 * (1 + span), rtol=1e-9)


def test_q_is_the_expectation_and_the_cross_entropy_is_least_at_the_target() -> None:
    values = categorical.support(-1.0, 1.0, 5)  # -1, -0.5, 0, 0.5, 1
    target = categorical.two_hot(torch.tensor([0.25]), values)
    torch.testing.assert_close(target, torch.tensor([[0.0, 0.0, 0.5, 0.5, 0.0]]))
    logits = target.clamp(min=1e-12).log()
    torch.testing.assert_close(categorical.expected(logits, values), torch.tensor([0.25]))
    at = categorical.cross_entropy(logits, target)
    other = categorical.cross_entropy(torch.zeros(1, 5), target)
    assert at < other
    torch.testing.assert_close(at, -(target * logits.log_softmax(-1)).sum(-1))


def _learner(
    sac: str = "critic: categorical, num_bins: 21, v_min: -2, v_max: 2", gamma: float = 0.99
) -> SacLearner:
    cfg = parse_config(
        "tasks: [{env: a/b}]\ncheckpoint: {replay: true}\n"
        f"learner: {{algorithm: sac, gamma: {gamma}, unroll_length: {T}, "
        "model: {encoder_dim: 16, torso: [32]}, "
        "sac: {replay_ratio: 64, batch_size: 32, learning_starts: 1, critic_lr: 0.003, "
        f"{sac}}}}}\n"
    )
    torch.manual_seed(0)
    model = MultiTaskModel([BOX, CART], cfg.learner.model)
    return make_sac_learner(model, cfg.learner, ["box", "cart"])


def _batch(task: int, space: TaskSpaces, rng: np.random.Generator, reward: float) -> TaskBatch:
    act = space.action_space
    actions = (
        torch.as_tensor(rng.integers(0, int(act.n), (T, N)))
        if isinstance(act, spaces.Discrete)
        else torch.as_tensor(rng.normal(size=(T, N, 1)), dtype=torch.float32)
    )
    obs = rng.normal(size=(T + 1, N, *space.observation_space.shape))
    return TaskBatch(
        task=task,
        obs=torch.as_tensor(obs, dtype=torch.float32),
        actions=actions,
        behaviour_logp=torch.zeros(T, N),
        rewards=torch.full((T, N), reward),
        terminated=torch.ones(T, N, dtype=torch.bool),  # y = r: no bootstrap
        truncated=torch.zeros(T, N, dtype=torch.bool),
        valid=torch.ones(T, N, dtype=torch.bool),
        policy_version=0,
    )


def test_the_critics_output_logits_and_their_q_learns_the_target() -> None:
    """Every step ends its episode with reward 0.7 (box) and -1.2 (cart): the critics' expected
    ``Q`` of the stored actions goes there; the heads give ``bins`` logits per action."""
    learner = _learner()
    assert learner.critic.q1.heads[0].out_features == 21
    assert learner.critic.q1.heads[1].out_features == 3 * 21
    rng = np.random.default_rng(0)
    for _ in range(12):
        learner.update([_batch(0, BOX, rng, 0.7), _batch(1, CART, rng, -1.2)])
    assert learner.gradient_steps > 100
    diag = learner.pop_diagnostics()
    assert diag["learner/box/q"] == pytest.approx(0.7, abs=0.1)
    assert diag["learner/cart/q"] == pytest.approx(-1.2, abs=0.1)
    assert np.isfinite(learner.update([])["losses/critic"])


def test_edge_reached_is_within_one_bin_of_either_end() -> None:
    # support -2..2 in 21 bins: one bin is 0.2 wide
    assert categorical.edge_reached(1.85, -2.0, 2.0, 21) == "v_max"
    assert categorical.edge_reached(1.75, -2.0, 2.0, 21) is None
    assert categorical.edge_reached(-1.81, -2.0, 2.0, 21) == "v_min"
    assert categorical.edge_reached(0.0, -2.0, 2.0, 21) is None


def test_targets_beyond_the_support_are_told_once_per_task(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every box step is worth 5, past v_max = 2: its Q piles up at 2 and the learner says so
    once, naming the task and the setting; the cart task's -1.2 fits and is not named."""
    learner = _learner()
    rng = np.random.default_rng(0)
    for _ in range(12):
        learner.update([_batch(0, BOX, rng, 5.0), _batch(1, CART, rng, -1.2)])
    diag = learner.pop_diagnostics()
    assert diag["learner/box/q"] > 1.8
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "WARNING" in ln]
    assert len(lines) == 1, lines
    assert "'box'" in lines[0] and "learner.sac.v_max (2)" in lines[0]
    learner.update([_batch(0, BOX, rng, 5.0), _batch(1, CART, rng, -1.2)])
    learner.pop_diagnostics()
    assert "WARNING" not in capsys.readouterr().out, "told once"


def test_a_reset_and_a_checkpoint_keep_the_categorical_heads() -> None:
    learner = _learner()
    rng = np.random.default_rng(0)
    learner.update([_batch(0, BOX, rng, 0.5), _batch(1, CART, rng, 0.5)])
    resets.reset(learner)
    buf = io.BytesIO()
    torch.save(learner.state_dict(), buf)
    buf.seek(0)
    other = _learner()
    other.load_state_dict(torch.load(buf, weights_only=True))
    for a, b in zip(other.critic.parameters(), learner.critic.parameters(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(RuntimeError, match="size mismatch"):  # an mse critic cannot take it
        _learner("critic: mse").load_state_dict(learner.state_dict())


RUN = """
tasks: [{env: gymnasium/Pendulum-v1}]
learner:
  algorithm: sac
  sac: {critic: categorical, v_min: 5, v_max: 5}
tracking: {run_dir: RUNS}
"""


@pytest.mark.parametrize("command", ["validate", "train"])
def test_a_support_that_is_not_an_interval_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    line = refused_text(command, RUN, tmp_path, capsys)
    assert "v_max (5) must be above v_min (5)" in line, line
