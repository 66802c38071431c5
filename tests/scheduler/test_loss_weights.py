"""Loss weights: the weighted learning signal meets the target shares, within the cap."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

from mtrl.train.loss_weights import (
    capped_tasks,
    effective_shares,
    loss_weights,
    weight_shortfalls,
)

NAN = float("nan")


def test_weights_turn_the_data_mix_into_the_target_mix() -> None:
    counts = np.array([600.0, 200.0, 200.0])  # task 0 delivers 60 % of the data
    targets = np.array([1.0, 1.0, 2.0])  # but should get 25 %, 25 %, 50 %
    w = loss_weights(counts, targets, max_weight=10.0)
    np.testing.assert_allclose(effective_shares(counts, w), [0.25, 0.25, 0.5])
    # the sample-weighted mean weight is 1: the step size does not change with the mix
    assert (counts * w).sum() / counts.sum() == pytest.approx(1.0)


def test_matching_data_gives_unit_weights_exactly() -> None:
    w = loss_weights(np.array([300.0, 100.0]), np.array([3.0, 1.0]), max_weight=4.0)
    assert w.tolist() == [1.0, 1.0]
    thirds = loss_weights(np.full(3, 320.0 * 0.98 + 320.0), np.full(3, 1 / 3), max_weight=4.0)
    assert thirds.tolist() == [1.0, 1.0, 1.0]  # bit for bit: a deterministic run is unchanged


def test_ungoverned_and_empty_tasks_keep_weight_one() -> None:
    counts = np.array([100.0, 300.0, 0.0, 50.0])
    targets = np.array([1.0, 1.0, 1.0, NAN])
    w = loss_weights(counts, targets, max_weight=4.0)
    assert w[2] == 1.0 and w[3] == 1.0
    governed = counts[:2] * w[:2]
    assert governed[0] == pytest.approx(governed[1])  # equal targets, equal signal
    assert loss_weights(np.array([5.0, 0.0]), np.array([1.0, 1.0]), 4.0).tolist() == [1.0, 1.0]


def test_cap_binds_for_a_starved_task_and_names_it() -> None:
    counts = np.array([950.0, 50.0])  # task 1 needs 10x its data share to reach 50 %
    targets = np.array([1.0, 1.0])
    w = loss_weights(counts, targets, max_weight=4.0)
    assert w[1] / w[0] == pytest.approx(4.0 / (0.5 / 0.95))  # task 1 clipped at 4, task 0 not
    shares = effective_shares(counts, w)
    assert shares[1] < 0.5
    assert capped_tasks(counts, targets, 4.0) == [1]
    assert capped_tasks(counts, targets, 20.0) == []


def test_static_shortfall_names_a_task_with_too_few_env_copies_for_its_weight() -> None:
    # one actor each; task 2 has 2 env copies against 16, at weight 2: share 0.5 vs 2/34
    short = weight_shortfalls([1.0, 1.0, 2.0], [16.0, 16.0, 2.0], max_weight=4.0)
    assert [(i, round(w, 3), round(c, 3)) for i, w, c in short] == [(2, 0.5, 0.059)]
    assert weight_shortfalls([1.0, 1.0, 2.0], [16.0, 16.0, 16.0], max_weight=4.0) == []


def test_validate_warns_when_the_actor_budget_cannot_meet_a_weight(tmp_path: Path) -> None:
    from mtrl.cli import main

    path = tmp_path / "short.yaml"
    path.write_text(
        "name: short\ntotal_env_steps: 1000\n"
        "scheduler: {policy: balanced, num_actors: 3}\n"
        "tasks:\n"
        "  - {env: gymnasium/CartPole-v1, num_envs: 16}\n"
        "  - {env: gymnasium/Acrobot-v1, num_envs: 16}\n"
        "  - {env: gymnasium/Pendulum-v1, num_envs: 1, weight: 3}\n"
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["validate", str(path)]) == 0  # a warning, not an error
    lines = [x for x in out.getvalue().splitlines() if "warning" in x]
    assert len(lines) == 1
    assert "tasks[2] (gymnasium/Pendulum-v1): weight share 60%" in lines[0]
    assert "tasks[2].num_envs 1" in lines[0]
    path.write_text(path.read_text().replace("num_envs: 1,", "num_envs: 16,"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["validate", str(path)]) == 0
    assert "warning" not in out.getvalue()
