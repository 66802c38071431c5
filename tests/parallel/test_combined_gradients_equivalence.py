"""With the tasks' torso gradients combined (``learner.multitask.gradients``: PCGrad, CAGrad),
N learner ranks still take one process's update: every rank's per-task gradients of the shared
parameters are summed over ranks before the combination, which every rank then computes alike.
So do task-conditioned torsos (``learner.model.torso_mixture``), sharded by task (MOORE, with
PCGrad) and by FSDP (MoE, soft modularization).

The problem of ``test_equivalence.py`` (four tasks, batches split by whole blocks and by env
columns, a task absent, a rank idle): PCGrad in data parallel (also through a shared LSTM,
whose parameters are shared too), CAGrad with task sharding (each rank then holds the
gradients of its own tasks only).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from parallel_scenarios import (
    WORLD,
    assert_matches_single_process,
    assert_ranks_identical,
    run_single_process,
)
from torchrun_launch import finish, torchrun

MODES = [
    "pcgrad-none",
    "pcgrad-recurrent-none",
    "cagrad-task_sharded",
    "moore-pcgrad-task_sharded",
    "moe-fsdp",
    "soft_modular-fsdp",
]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("combined_ranks")
    finish(torchrun(["--standalone", f"--nproc-per-node={WORLD}"], out, MODES), timeout=200)
    return {
        m: [torch.load(out / f"{m}_rank{r}.pt", weights_only=False) for r in range(WORLD)]
        for m in MODES
    }


@pytest.mark.parametrize("mode", MODES)
def test_ranks_match_single_process(mode: str, ranks) -> None:
    reference = run_single_process(mode)
    for result in ranks[mode]:
        assert_matches_single_process(result, reference)


@pytest.mark.parametrize("mode", MODES)
def test_ranks_stay_identical_and_resume_exactly(mode: str, ranks) -> None:
    assert_ranks_identical(ranks[mode])
    for r in ranks[mode]:
        res = r["resume"]
        for name, want in res["continued"].items():
            torch.testing.assert_close(res["resumed"][name], want, rtol=0, atol=1e-7, msg=name)


def test_the_combination_changes_the_update(ranks) -> None:
    """Guards the test itself: the combined run ends elsewhere than the plain sum's."""
    plain = run_single_process("none")["state"]
    for mode in ("pcgrad-none", "cagrad-task_sharded"):
        combined = ranks[mode][0]["state"]
        assert any(
            not torch.allclose(combined[k], plain[k], atol=1e-6) for k in plain if "torso" in k
        ), mode
