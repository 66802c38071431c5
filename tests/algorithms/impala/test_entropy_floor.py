"""The entropy bonus's multiplier rule: by dual ascent in log space, under an entropy floor for
discrete tasks and a saturation ceiling for squashed Gaussian tasks."""

from __future__ import annotations

import math

import pytest
import torch

from mtrl.algorithms.impala.entropy_floor import (
    MAX_BOOST,
    boost_step,
    entropy_shortfall,
    saturation_excess,
)

H3 = math.log(3)
NAN = float("nan")


def _floor_step(boost, entropy, max_entropy, floor=0.25, seen=None):
    boost = torch.tensor(boost, dtype=torch.float64)
    seen = torch.ones(len(boost), dtype=torch.bool) if seen is None else torch.tensor(seen)
    v = entropy_shortfall(torch.tensor(entropy), torch.tensor(max_entropy), floor)
    return boost_step(boost, v, seen)


def test_below_the_floor_the_bonus_grows_above_it_decays_back_to_one() -> None:
    # 0.1 of H_max is 0.15 below a floor of 0.25: log boost rises by 0.15.
    got = _floor_step([1.0, 3.0, 1.0], [0.1 * H3, 0.5 * H3, 0.5 * H3], [H3, H3, H3])
    assert got[0].item() == pytest.approx(math.exp(0.15))
    assert got[1].item() == pytest.approx(3.0 * math.exp(-0.25))  # above: decays
    assert got[2].item() == 1.0  # never below 1: the plain bonus


def test_the_boost_is_capped_and_a_collapsed_policy_reaches_the_cap() -> None:
    boost = torch.ones(1, dtype=torch.float64)
    for _ in range(200):
        v = entropy_shortfall(torch.zeros(1), torch.tensor([H3]), 0.25)
        boost = boost_step(boost, v, torch.ones(1, dtype=torch.bool))
    assert boost.item() == pytest.approx(MAX_BOOST)


def test_gaussians_unseen_tasks_and_a_zero_floor_keep_the_plain_or_old_bonus() -> None:
    got = _floor_step([1.0, 2.0], [0.0, 0.0], [NAN, H3], seen=[True, False])
    assert got.tolist() == [1.0, 2.0]  # no maximum entropy: 1; not in the batch: unchanged
    assert _floor_step([5.0], [0.0], [H3], floor=0.0).tolist() == [1.0]


def test_above_the_saturation_ceiling_a_squashed_gaussian_bonus_grows() -> None:
    squashed = torch.tensor([True, True, False])
    v = saturation_excess(torch.tensor([0.7, 0.05, 0.9]), squashed, 0.2)
    assert v[0].item() == pytest.approx(0.5) and v[1].item() == pytest.approx(-0.15)
    assert math.isnan(v[2].item())  # not squashed (unbounded Box, or a discrete task)
    got = boost_step(torch.tensor([1.0, 4.0, 7.0], dtype=torch.float64), v, torch.ones(3) > 0)
    assert got[0].item() == pytest.approx(math.exp(0.5))
    assert got[1].item() == pytest.approx(4.0 * math.exp(-0.15))  # below: decays
    assert got[2].item() == 1.0
    off = saturation_excess(torch.tensor([1.0]), torch.tensor([True]), 1.0)
    assert math.isnan(off.item())  # ceiling 1: off


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="floor must be in"):
        _floor_step([1.0], [0.0], [H3], floor=1.0)
    with pytest.raises(ValueError, match="vectors of one length"):
        _floor_step([1.0, 1.0], [0.0], [H3, H3])
    with pytest.raises(ValueError, match="ceiling must be in"):
        saturation_excess(torch.zeros(1), torch.ones(1) > 0, 0.0)
