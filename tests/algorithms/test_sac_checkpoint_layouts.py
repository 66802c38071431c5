"""A SAC checkpoint resumes whichever gradient step took it and whichever takes it up.

The stacked step's optimisers step stacks that the per-task modules alias; the per-task step's,
the modules themselves (which one a learner takes depends on its device and tasks). The
optimisers' states are saved per named parameter, so a checkpoint of either continues in the
other exactly as it would have in its own: after a save and load through torch's (weights-only)
files, one more step lands on the same parameters as the learner that never stopped. An older
checkpoint (torch's positional states) still loads into its own layout, and into another one
refuses with one line naming the tensor that does not fit.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
import torch

from mtrl.algorithms.sac import SacLearner
from mtrl.errors import UserError
from tests.algorithms.test_sac_stacked_step import BOX, MIXED, _fill, _learner, _same, _step

CASES = {
    "three tasks of one shape": ([BOX] * 3, {}, [8, 8, 8]),
    "mixed spaces": (MIXED, {}, [4, 3, 4, 2, 4, 4, 3]),
    "residual torso, normalized observations": (
        [BOX] * 3,
        {"model": ", torso_block: residual", "sac": ", normalize_obs: true"},
        [11, 2, 11],
    ),
    "famo": ([BOX] * 3, {"loss_weighting": "famo"}, [5, 9, 10]),
}


def _through_file(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` written and read back as a checkpoint is (weights only)."""
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def _with_replay(learner: SacLearner) -> SacLearner:
    """``learner`` with its replay in its checkpoints (``checkpoint.replay: true``)."""
    learner.cfg._checkpoint_replay = True
    return learner


def _trained(tasks: list, stacked: bool, over: dict[str, str], counts: list[int]) -> SacLearner:
    learner = _with_replay(_learner(tasks, stacked, **over))
    _fill(learner)
    for _ in range(3):
        _step(learner, counts, _noise(tasks))
    return learner


def _noise(tasks: list) -> bool:
    """Whether both steps can draw the same noise (one group of Box tasks), as the stacked
    step's tests decide."""
    return all(t is BOX for t in tasks)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("saved_by", ["stacked", "per-task"])
def test_a_checkpoint_continues_in_the_other_step(case: str, saved_by: str) -> None:
    tasks, over, counts = CASES[case]
    source = _trained(tasks, saved_by == "stacked", over, counts)
    state = _through_file(source.state_dict())
    resumed = _with_replay(_learner(tasks, saved_by != "stacked", **over))
    assert (resumed.stacked is None) == (saved_by == "stacked")
    resumed.load_state_dict(state)
    _same(source, resumed, tol=0.0)
    for _ in range(2):  # the moments carried over decide these steps' sizes
        a, b = _step(source, counts, _noise(tasks)), _step(resumed, counts, _noise(tasks))
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    _same(source, resumed)
    # Without the moments the same steps land elsewhere: the comparison above can fail.
    fresh = _with_replay(_learner(tasks, saved_by != "stacked", **over))
    fresh.load_state_dict({**state, "actor_optimizer": fresh.actor_opt.state_dict()})
    _step(fresh, counts, _noise(tasks))
    _step(fresh, counts, _noise(tasks))
    with pytest.raises(AssertionError):
        _same(source, fresh)


def test_a_positional_checkpoint_loads_into_its_own_layout_only() -> None:
    tasks, over, counts = CASES["three tasks of one shape"]
    source = _trained(tasks, True, over, counts)
    state = source.state_dict()
    state["actor_optimizer"] = source.actor_opt.state_dict()  # as older checkpoints hold it
    state["critic_optimizer"] = source.critic_opt.state_dict()
    state = _through_file(state)
    same_layout = _with_replay(_learner(tasks, True, **over))
    same_layout.load_state_dict(state)
    _step(source, counts), _step(same_layout, counts)
    _same(source, same_layout)
    other_layout = _learner(tasks, False, **over)
    with pytest.raises(UserError, match="SAC actor optimiser state does not fit this learner"):
        other_layout.load_state_dict(state)
