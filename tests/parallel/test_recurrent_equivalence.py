"""With a recurrent core, N learner ranks still take one process's update.

The problem of ``test_equivalence.py`` (four tasks, batches split by whole blocks and by env
columns, a task absent, a rank idle), now through a recurrent core run from each unroll's
random initial states with resets at its episode starts: a shared LSTM in data parallel and
under an FSDP torso, per-task GRUs with task sharding (each rank then owns its tasks' cores).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from parallel_scenarios import (
    NAMES,
    WORLD,
    assert_matches_single_process,
    assert_ranks_identical,
    build_model,
    run_single_process,
)
from torchrun_launch import finish, torchrun

MODES = ["recurrent-none", "recurrent-task_sharded", "recurrent-fsdp"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("recurrent_ranks")
    finish(torchrun(["--standalone", f"--nproc-per-node={WORLD}"], out, MODES), timeout=200)
    return {
        m: [torch.load(out / f"{m}_rank{r}.pt", weights_only=False) for r in range(WORLD)]
        for m in MODES
    }


@pytest.mark.parametrize("mode", MODES)
def test_recurrent_ranks_match_single_process(mode: str, ranks) -> None:
    reference = run_single_process(mode)
    assert any(k.startswith(("core.", "cores.")) for k in reference["state"])
    for result in ranks[mode]:
        assert_matches_single_process(result, reference)
    assert_ranks_identical(ranks[mode])


@pytest.mark.parametrize("mode", MODES)
def test_a_recurrent_learner_resumes_from_rank_0s_state(mode: str, ranks) -> None:
    full = build_model(mode)
    for r in ranks[mode]:
        res = r["resume"]
        assert res["saved_model_keys"] == sorted(full.state_dict())
        assert res["versions"] == (3, 3)
        for name, want in res["continued"].items():
            torch.testing.assert_close(res["resumed"][name], want, rtol=0, atol=1e-7, msg=name)


def test_task_sharding_places_each_per_task_core_with_its_task(ranks) -> None:
    for r in ranks["recurrent-task_sharded"]:
        for k in range(len(NAMES)):
            held = any(key.startswith(f"cores.{k}.") for key in r["local_keys"])
            assert held == (k in r["local_tasks"]), f"core {k} on a rank owning {r['local_tasks']}"
