"""Sharded replay (``replay.shards``) on real Ray: draws across shards on two nodes follow the
global priorities (chi-square, and a wrong split is told apart), the rate limiter holds its
ratio within 10 % whichever side waits, a shard killed mid-run is counted, reported and
started again while the draws go on, and SAC and IMPALA with replay train on shards in a real
run with Ray actors. Each scenario runs in its own process in a private network namespace
(tests/ray/ray_netns.py); the scenarios are in tests/ray/shard_scenarios.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray_netns import run_scenario  # tests/ray/, on sys.path under pytest's rootdir-less import

pytest.importorskip("ray", reason="the ray extra is not installed")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

SCRIPT = Path(__file__).with_name("shard_scenarios.py")


def test_draws_across_shards_on_two_nodes_follow_the_global_priorities() -> None:
    r = run_scenario("proportions_follow_priorities", script=SCRIPT)
    assert r["draws"] == 300_000
    assert r["pvalue"] > 1e-3, "the counts per item do not match p^alpha / sum"
    assert r["wrong_pvalue"] < 1e-6, "the test tells a wrong split apart"
    assert r["weights_ok"], "importance weights are the unsharded sampler's"
    assert r["shard_nodes"] == r["workers"], "one shard on each worker node, none on the head"


def test_the_rate_limiter_holds_samples_per_insert_within_ten_percent() -> None:
    r = run_scenario("limiter_holds_ratio", script=SCRIPT)
    for waits in ("actors", "learner"):
        m = r[waits]
        assert abs(m["ratio"] - 2.0) / 2.0 < 0.10, (waits, m)
        assert m["rate_overruns"] == 0, (waits, m)
    assert r["actors"]["insert_wait_s"] > 0 and r["actors"]["held_unrolls"] > 0
    assert r["learner"]["learner_wait_s"] > 0, "the draws waited for inserts in flight"


def test_a_shard_killed_mid_run_is_counted_restarted_and_the_draws_go_on() -> None:
    r = run_scenario("shard_lost_mid_run", script=SCRIPT)
    assert r["rows"] == [32] * 8, "every draw after the loss was whole"
    assert r["lost_shards"] == 1 and r["lost_items"] == 40
    assert r["restarted"] and r["per_shard"][0] > 0, "the new shard takes inserts again"


@pytest.mark.parametrize("algorithm", ["sac", "impala_replay"])
def test_a_replay_rule_trains_on_shards_with_ray_actors(algorithm: str) -> None:
    r = run_scenario("sac_trains_on_shards", script=SCRIPT, algorithm=algorithm)
    assert r["env_steps"] >= 3000 and r["sharded"] and r["shards"] == 4
    assert sum(r["counts"]) > 0, r["counts"]  # the scheduler may leave one task without actors
    if algorithm == "sac":
        assert all(c > 0 for c in r["counts"]) and r["gradient_steps"] > 0, r
    assert r["diagnostics_have_replay"] and r["metrics"]["replay/lost_shards"] == 0
