"""The entropy floor's rule: each discrete task's bonus multiplier, by dual ascent in log space."""

from __future__ import annotations

import math

import pytest
import torch

from mtrl.learner.entropy_floor import MAX_BOOST, boost_step

H3 = math.log(3)
NAN = float("nan")


def _step(boost, entropy, max_entropy, floor=0.25, seen=None):
    boost = torch.tensor(boost, dtype=torch.float64)
    seen = torch.ones(len(boost), dtype=torch.bool) if seen is None else torch.tensor(seen)
    return boost_step(
        boost, torch.tensor(entropy), torch.tensor(max_entropy, dtype=torch.float64), floor, seen
    )


def test_below_the_floor_the_bonus_grows_above_it_decays_back_to_one() -> None:
    # 0.1 of H_max is 0.15 below a floor of 0.25: log boost rises by 0.15.
    got = _step([1.0, 3.0, 1.0], [0.1 * H3, 0.5 * H3, 0.5 * H3], [H3, H3, H3])
    assert got[0].item() == pytest.approx(math.exp(0.15))
    assert got[1].item() == pytest.approx(3.0 * math.exp(-0.25))  # above: decays
    assert got[2].item() == 1.0  # never below 1: the plain bonus


def test_the_boost_is_capped_and_a_collapsed_policy_reaches_the_cap() -> None:
    boost = torch.ones(1, dtype=torch.float64)
    for _ in range(200):
        boost = boost_step(
            boost, torch.zeros(1), torch.tensor([H3]), 0.25, torch.ones(1, dtype=torch.bool)
        )
    assert boost.item() == pytest.approx(MAX_BOOST)


def test_gaussians_unseen_tasks_and_a_zero_floor_keep_the_plain_or_old_bonus() -> None:
    got = _step([1.0, 2.0], [0.0, 0.0], [NAN, H3], seen=[True, False])
    assert got.tolist() == [1.0, 2.0]  # no maximum entropy: 1; not in the batch: unchanged
    assert _step([5.0], [0.0], [H3], floor=0.0).tolist() == [1.0]


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="floor must be in"):
        _step([1.0], [0.0], [H3], floor=1.0)
    with pytest.raises(ValueError, match="vectors of one length"):
        _step([1.0, 1.0], [0.0], [H3, H3])
