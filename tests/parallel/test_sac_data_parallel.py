"""Data-parallel SAC: two replicas, each drawing its own rows, take the same steps as one
process drawing both ranks' rows with twice the batch — critic, policy, targets and
temperatures — and stay equal to each other, also after a resume from rank 0's state."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from sac_scenarios import (
    BATCH,
    NAMES,
    WORLD,
    FixedRowsSac,
    build_model,
    learner_config,
    run_single_process,
)
from torchrun_launch import HERE, finish, torchrun

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


# -per-task: SAC's per-task step; famo: FAMO's weighted critic losses.
COMBINATIONS = ["sum", "pcgrad", "sum-per-task", "famo", "famo-per-task"]


@pytest.fixture(scope="module")
def all_ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("sac_ranks")
    args = ["--standalone", f"--nproc-per-node={WORLD}"]
    finish(torchrun(args, out, COMBINATIONS, worker=HERE / "sac_dist_worker.py"), timeout=240)
    return {
        g: [torch.load(out / f"sac_{g}_rank{r}.pt", weights_only=False) for r in range(WORLD)]
        for g in COMBINATIONS
    }


@pytest.fixture(scope="module")
def ranks(all_ranks: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return all_ranks["sum"]


def _tensors(result: dict[str, Any]) -> dict[str, torch.Tensor]:
    flat = {"log_alpha": result["log_alpha"]}
    if "famo_logits" in result:
        flat["famo_logits"] = result["famo_logits"]
    for part in ("model", "critic", "target"):
        flat.update({f"{part}.{k}": v for k, v in result[part].items()})
    return flat


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return run_single_process()


def test_replicas_match_one_process_on_the_union_of_their_rows(ranks, reference) -> None:
    # The replay ratio counts both ranks' env steps, as one process with the batch of both.
    assert ranks[0]["gradient_steps"] == reference["gradient_steps"] > 0
    expected = _tensors(reference)
    for r, result in enumerate(ranks):
        got = _tensors(result)
        for name, value in expected.items():
            torch.testing.assert_close(
                got[name], value, rtol=1e-4, atol=1e-5, msg=f"rank {r} {name}"
            )
    for want, got in zip(reference["metrics"], ranks[0]["metrics"], strict=True):
        for key in ("losses/critic", "losses/actor", "sac/gradient_steps"):
            assert got.get(key) == pytest.approx(want.get(key), rel=1e-4, abs=1e-6), key


def test_the_reference_moves_every_part_and_clips(reference) -> None:
    """Guards the test itself: temperatures and both Discrete and Box heads move, and the
    gradient clip changes the steps (so the replicas must clip the averaged gradient)."""
    start = FixedRowsSac(build_model(), learner_config(WORLD * BATCH), NAMES)
    assert not torch.allclose(reference["log_alpha"], start.log_alpha.detach())
    moved = {
        k for k, v in start.model.state_dict().items() if not torch.equal(v, reference["model"][k])
    }
    heads = {f"policy_heads.{k}.linear.weight" for k in (0, 1)} | {"policy_heads.2.mean.weight"}
    assert heads <= moved, moved
    unclipped = run_single_process(max_grad_norm=None)
    critic = reference["critic"]
    assert any(not torch.allclose(v, critic[k]) for k, v in unclipped["critic"].items())


def test_replicas_stay_identical_and_a_resumed_replica_continues_exactly(ranks) -> None:
    for part in (None, "continued", "resumed"):
        results = [r if part is None else r[part] for r in ranks]
        first = _tensors(results[0])
        for other in results[1:]:
            for name, value in _tensors(other).items():
                assert torch.equal(value, first[name]), (part, name)
    for r in ranks:
        for name, value in _tensors(r["continued"]).items():
            assert torch.equal(_tensors(r["resumed"])[name], value), name


def test_replicas_on_the_per_task_step_match_one_process(all_ranks) -> None:
    """The per-task step (what Dict observations and per-task step sizes take) in data
    parallel, against one process on it; and the same end as the stacked step's."""
    reference = run_single_process(stacked=False)
    expected = _tensors(reference)
    stacked = _tensors(run_single_process())
    for name, value in expected.items():
        torch.testing.assert_close(stacked[name], value, rtol=1e-4, atol=1e-5, msg=name)
    for r, result in enumerate(all_ranks["sum-per-task"]):
        got = _tensors(result)
        for name, value in expected.items():
            torch.testing.assert_close(
                got[name], value, rtol=1e-4, atol=1e-5, msg=f"rank {r} {name}"
            )


def test_replicas_combining_the_tasks_gradients_match_one_process(all_ranks) -> None:
    """PCGrad on the policy's and the critics' torsos: every replica's per-task gradients are
    averaged before the combination, as one process's over the union of the rows."""
    reference = run_single_process(gradients="pcgrad")
    expected = _tensors(reference)
    plain = _tensors(run_single_process())
    assert any(
        not torch.allclose(plain[k], v, atol=1e-6) for k, v in expected.items() if "torso" in k
    )
    for r, result in enumerate(all_ranks["pcgrad"]):
        got = _tensors(result)
        for name, value in expected.items():
            torch.testing.assert_close(
                got[name], value, rtol=1e-4, atol=1e-5, msg=f"rank {r} {name}"
            )


@pytest.mark.parametrize("path", ["famo", "famo-per-task"])
def test_replicas_weighing_the_critic_losses_by_famo_match_one_process(all_ranks, path) -> None:
    """FAMO on the critics: each task's loss sums are summed over the replicas before and
    after the critics' step, so every replica takes one process's multipliers and logit step,
    on either step path."""
    reference = run_single_process(gradients="famo", stacked=path == "famo")
    expected = _tensors(reference)
    assert not torch.equal(expected["famo_logits"], torch.zeros(len(NAMES)))
    plain = _tensors(run_single_process())
    assert any(not torch.allclose(v, expected[k], atol=1e-6) for k, v in plain.items() if "q1" in k)
    for r, result in enumerate(all_ranks[path]):
        got = _tensors(result)
        for name, value in expected.items():
            torch.testing.assert_close(
                got[name], value, rtol=1e-4, atol=1e-5, msg=f"rank {r} {name}"
            )
