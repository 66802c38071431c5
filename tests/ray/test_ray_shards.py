"""Sharded replay (``replay.shards``) on real Ray: draws across shards on two nodes follow the
global priorities (chi-square, and a wrong split is told apart), the rate limiter holds its
ratio within 10 % whichever side waits, a shard killed mid-run is counted, reported and
started again while the draws go on (a call to the lost shard failing after its restart is
not a second loss), SAC and IMPALA with replay train on shards in a real
run with Ray actors, and SAC's Ray actors store their unrolls in their own node's shard (the
learner gets summaries, no unroll data; each shard's data came from its node's actors; the
rate limiter's waits counted on the side that waits; a shard killed mid-run survived). Each
scenario runs in its own process in a private network namespace (tests/ray/ray_netns.py);
the scenarios are in tests/ray/shard_scenarios.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray_netns import run_scenario  # tests/ray/, on sys.path under pytest's rootdir-less import

pytest.importorskip("ray", reason="the ray extra is not installed")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

SCRIPT = Path(__file__).with_name("shard_scenarios.py")


@pytest.mark.parametrize("draw_batches", [1, 4])
def test_draws_across_shards_on_two_nodes_follow_the_global_priorities(draw_batches: int) -> None:
    r = run_scenario("proportions_follow_priorities", script=SCRIPT, draw_batches=draw_batches)
    assert r["draws"] == 300_000
    assert r["pvalue"] > 1e-3, "the counts per item do not match p^alpha / sum"
    assert r["wrong_pvalue"] < 1e-6, "the test tells a wrong split apart"
    assert r["weights_ok"], "importance weights are the unsharded sampler's"
    assert 0.7 < r["dispersion"] < 1.3, "each batch a mix of the shards, as one draw's rows"
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


def test_a_call_to_a_lost_shard_failing_after_its_restart_is_not_a_second_loss() -> None:
    r = run_scenario("call_sent_before_a_loss_fails_after_the_restart", script=SCRIPT)
    assert r["pending"] == 1 and r["lost_then"] == 1, r
    assert r["lost_shards"] == 1, "the old shard's late failure counted again"
    assert r["same_shard"], "the restarted shard was replaced for its predecessor's failure"
    assert r["per_shard"] == [20, 40], "the restarted shard holds the one insert it got"


@pytest.mark.parametrize("algorithm", ["sac", "impala_replay"])
def test_a_replay_rule_trains_on_shards_with_ray_actors(algorithm: str) -> None:
    r = run_scenario("sac_trains_on_shards", script=SCRIPT, algorithm=algorithm)
    assert r["env_steps"] >= 3000 and r["sharded"] and r["shards"] == 4
    assert sum(r["counts"]) > 0, r["counts"]  # the scheduler may leave one task without actors
    if algorithm == "sac":
        assert all(c > 0 for c in r["counts"]) and r["gradient_steps"] > 0, r
    assert r["diagnostics_have_replay"] and r["metrics"]["replay/lost_shards"] == 0


def _from_own_node(snap: dict) -> bool:
    """Every actor's insert into each shard came from an actor on the shard's node (the
    learner's own inserts, of unrolls whose shard was lost, aside)."""
    where, sources = snap["where"], snap["sources"]
    senders = {
        key: {n for per_task in s.values() for n in per_task if n != "learner"}
        for key, s in sources.items()
    }
    return all(senders[key] <= {where[key]} for key in where) and any(senders.values())


@pytest.mark.parametrize("waits", ["actors", "learner"])
def test_sac_actors_store_their_unrolls_in_their_own_nodes_shard(waits: str) -> None:
    r = run_scenario("sac_inserts_at_actors", script=SCRIPT, waits=waits)
    before = r["before"]
    assert before is not None, r
    assert sorted(before["where"].values()) == r["workers"], "one shard per worker node"
    pool, replay = before["pool"], before["replay"]
    assert pool["actors/summaries"] > 0 and pool["actors/unroll_bytes"] == 0, pool
    assert 0 < replay["replay/actor_inserts"] <= pool["actors/summaries"], replay
    assert replay["replay/learner_inserts"] == 0, replay
    assert _from_own_node(before), before["sources"]
    assert r["obs_count"] > 0, "normalize_obs took the actors' moments"
    if waits == "actors":
        assert replay["replay/actor_wait_s"] > 0 and replay["replay/actor_overruns"] > 0, replay
        after = r["after"]
        assert after["replay"]["replay/lost_shards"] == 1, after["replay"]
        assert r["env_steps"] >= before["env_steps"] + 2000, "the run went on"
        assert after["replay"]["replay/actor_inserts"] > replay["replay/actor_inserts"]
        assert _from_own_node(after), "the restarted shard is fed by its node's actors"
    else:
        assert replay["replay/learner_wait_s"] > 0, replay
        assert replay["replay/samples_per_insert"] < 0.5 * 1.25, replay
