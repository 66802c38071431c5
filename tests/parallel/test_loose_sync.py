"""Replicas that learn alone between synchronisations (``learner.parallel.sync``), on two real
gloo ranks under torchrun (tests/parallel/sync_worker.py runs them):

- ``local_sgd`` with H = 1 and a linear optimiser takes the all-reduce learner's steps;
- a sync leaves every replica with exactly the mean of the replicas' states (``local_sgd``) or
  DiLoCo's outer Nesterov step on their mean change (``diloco``), statistics averaged;
- a DiLoCo learner saved mid-period and resumed continues as the one never stopped;
- ``async`` gossip: a replica keeps training while its peer takes no step at all, and the two
  end with one model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from parallel_scenarios import WORLD
from torchrun_launch import finish, torchrun

from mtrl.sync.replica_state import outer_step

WORKER = Path(__file__).with_name("sync_worker.py")
SCENARIOS = ["equivalence", "local_sgd", "diloco", "resume", "gossip"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("sync")
    proc = torchrun(["--standalone", f"--nproc-per-node={WORLD}"], out, SCENARIOS, WORKER)
    finish(proc, timeout=360)
    return {
        s: [torch.load(out / f"{s}_rank{r}.pt", weights_only=False) for r in range(WORLD)]
        for s in SCENARIOS
    }


def _close(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5, msg=what)


def test_local_sgd_every_update_with_sgd_is_the_all_reduce_learner(ranks) -> None:
    for r in ranks["equivalence"]:
        assert r["syncs"] == 3
        for name, want in r["allreduce"]["model"].items():
            _close(r["local"]["model"][name], want, name)


def test_local_sgd_leaves_every_replica_at_the_mean_of_their_states(ranks) -> None:
    results = ranks["local_sgd"]
    for r in results:
        assert r["synced"] == [False, True, False, True]
        for before, after in zip(r["before"], r["after"], strict=True):
            params = torch.stack([b["params"] for b in before]).mean(0)
            stats = torch.stack([b["stats"] for b in before]).mean(0)
            _close(after["params"], params, "params")
            _close(after["stats"], stats, "stats")
            assert torch.equal(after["seen"], before[0]["seen"] | before[1]["seen"])
            # The replicas had drifted apart: the sync did something.
            assert not torch.allclose(before[0]["params"], before[1]["params"])
    _same_on_every_rank([r["after"][-1] for r in results])


def test_diloco_takes_an_outer_nesterov_step_on_the_mean_change(ranks) -> None:
    results = ranks["diloco"]
    for r in results:
        anchor = r["start"]["params"]
        momentum = torch.zeros_like(anchor)
        for before, after in zip(r["before"], r["after"], strict=True):
            delta = torch.stack([anchor - b["params"] for b in before]).mean(0)
            anchor, momentum = outer_step(anchor, momentum, delta, 0.7, 0.9)
            _close(after["params"], anchor, "params")
            _close(after["stats"], torch.stack([b["stats"] for b in before]).mean(0), "stats")
        # Not the plain mean: the outer step with momentum went further.
        mean = torch.stack([b["params"] for b in r["before"][-1]]).mean(0)
        assert not torch.allclose(r["after"][-1]["params"], mean)
    _same_on_every_rank([r["after"][-1] for r in results])


def test_popart_heads_follow_the_averaged_statistics(ranks) -> None:
    """After a sync, each task's value head predicts, in returns, what the unnormalised
    average says: w·σ and b·σ + μ with the averaged μ and ν give back the shared params."""
    after = ranks["local_sgd"][0]["after"][-1]
    mu, nu = after["mu"], after["nu"]
    sigma = (nu - mu * mu).clamp(min=1e-8).sqrt().clamp(max=1e6).float()
    w, b = after["model"]["value_weight"], after["model"]["value_bias"]
    assert (sigma != 1).any(), "PopArt moved the statistics: the check is not trivial"
    flat = after["params"]
    n_w = w.numel()
    names = list(after["model"])
    offset = 0
    for name in names:  # the flat params follow model.parameters(), i.e. the state's order
        numel = after["model"][name].numel()
        if name == "value_weight":
            _close(flat[offset : offset + n_w].view_as(w), w * sigma.unsqueeze(1), name)
        if name == "value_bias":
            _close(flat[offset : offset + numel], b * sigma + mu.float(), name)
        offset += numel


def test_a_diloco_learner_resumed_mid_period_continues_exactly(ranks) -> None:
    for r in ranks["resume"]:
        assert r["syncs"] == 3  # after updates 2, 4 and 6; saved after 3
        for name, want in r["continued"]["model"].items():
            assert torch.equal(r["resumed"]["model"][name], want), name
        _close(r["resumed"]["stats"], r["continued"]["stats"], "stats")
    _same_on_every_rank([r["continued"] for r in ranks["resume"]])


def test_async_gossip_never_waits_for_a_peer_and_ends_with_one_model(ranks) -> None:
    fast, slow = ranks["gossip"]
    # Rank 0 made all 12 updates and its 6 sends while rank 1 had not stepped once.
    assert fast["sent"] + fast["dropped"] == 6 and fast["sent"] >= 1
    assert fast["mixed"] == 0 or fast["mixed"] >= 1  # what rank 1 sent came after its end
    assert slow["mixed"] >= 1, "the straggler mixed in what its fast peer had sent"
    assert slow["global_steps"] == 1200 + 1200, "the peer's count came with its states"
    _same_on_every_rank([fast["final"], slow["final"]])


def _same_on_every_rank(states: list[dict[str, Any]]) -> None:
    first = states[0]
    for other in states[1:]:
        for name, t in first["model"].items():
            assert torch.equal(t, other["model"][name]), f"{name} differs between ranks"
        assert torch.equal(first["mu"], other["mu"])
