"""N learner ranks on N shards of a batch take the same update as one process on all of it.

Two ranks under torchrun (gloo, CPU) run three updates on a 4-task problem (vector/discrete,
vector/continuous, uint8 image, Dict with an action mask) whose batches are split between
the ranks by whole blocks and by env columns, with a task absent from the first update and
one rank idle in the last. One process runs the same updates on the whole batches. After
every mode — data parallel, task-sharded, FSDP torso — parameters, PopArt statistics and
metrics must agree with the single process, and the ranks with each other exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from parallel_scenarios import (
    NAMES,
    WORLD,
    assert_matches_single_process,
    assert_ranks_identical,
    build_model,
    learner_config,
    run_single_process,
)
from torchrun_launch import finish, torchrun

pytestmark = pytest.mark.slow

MODES = ["none", "task_sharded", "fsdp"]


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return run_single_process()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("ranks")
    finish(torchrun(["--standalone", f"--nproc-per-node={WORLD}"], out, MODES), timeout=150)
    return _load(out, MODES)


def _load(out: Path, modes: list[str]) -> dict[str, list[dict[str, Any]]]:
    return {
        m: [torch.load(out / f"{m}_rank{r}.pt", weights_only=False) for r in range(WORLD)]
        for m in modes
    }


def test_the_reference_exercises_clipping_and_popart(reference: dict[str, Any]) -> None:
    """Guards the test itself: the global-norm clip and the statistics must be in play."""
    max_norm = learner_config().max_grad_norm
    assert all(m["losses/grad_norm"] > max_norm for m in reference["metrics"])
    sigma = {n: reference["metrics"][-1][f"popart/{n}/sigma"] for n in NAMES}
    assert sigma["continuous"] > 5 * sigma["image"]  # reward scales 100 and 0.1


@pytest.mark.timeout(200)
@pytest.mark.parametrize("mode", MODES)
def test_ranks_match_single_process(mode: str, ranks, reference) -> None:
    for result in ranks[mode]:
        assert_matches_single_process(result, reference)


@pytest.mark.timeout(200)
@pytest.mark.parametrize("mode", MODES)
def test_ranks_stay_identical(mode: str, ranks) -> None:
    assert_ranks_identical(ranks[mode])


@pytest.mark.timeout(200)
@pytest.mark.parametrize("mode", MODES)
def test_a_learner_resumed_from_rank_0s_state_continues_exactly(mode: str, ranks) -> None:
    """The state rank 0 saves holds the whole learner (every task's modules, the full torso,
    every parameter's optimiser state), and a fresh replica that loads it takes the same next
    update as the one that saved it."""
    full = build_model()
    for r in ranks[mode]:
        res = r["resume"]
        assert res["saved_model_keys"] == sorted(full.state_dict())
        assert res["saved_optimizer_params"] == len(list(full.parameters()))
        assert res["versions"] == (3, 3)
        for name, want in res["continued"].items():
            torch.testing.assert_close(res["resumed"][name], want, rtol=0, atol=1e-7, msg=name)


@pytest.mark.timeout(200)
def test_context_sums_values_over_ranks(ranks) -> None:
    for r in ranks["none"]:
        assert r["all_sum"] == [WORLD, sum(range(WORLD))]


@pytest.mark.timeout(200)
def test_task_sharding_keeps_each_task_module_on_its_owner_only(ranks) -> None:
    results = ranks["task_sharded"]
    owned = [set(r["local_tasks"]) for r in results]
    assert set.union(*owned) == set(range(len(NAMES)))
    assert sum(len(o) for o in owned) == len(NAMES)  # each task on exactly one rank
    for r, tasks in zip(results, owned, strict=True):
        for k in range(len(NAMES)):
            held = any(
                key.startswith((f"encoders.{k}.", f"policy_heads.{k}.")) for key in r["local_keys"]
            )
            assert held == (k in tasks), f"task {k} on a rank owning {sorted(tasks)}"
        assert any(key.startswith("torso.") for key in r["local_keys"])


@pytest.mark.timeout(200)
def test_fsdp_shards_the_torso(ranks) -> None:
    """Each rank holds a slice of the torso (its full tensors came from a gather)."""
    for r in ranks["fsdp"]:
        assert r["torso_local_numel"] < r["torso_full_numel"]
