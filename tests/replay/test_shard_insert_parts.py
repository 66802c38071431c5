"""The pure parts of actor-side inserts into sharded replay, without Ray: where shards go (the
nodes with CPUs that offer what a shard asks, shard ``i`` on host ``i mod hosts``), what each
node then holds and the one-line refusal when it does not fit, a shard's answers (numbered,
its inserts counted per sender, its share of the limiter for waiting actors), and the
observation moments an actor sends instead of its observations (merged, they are the
learner's own statistics)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from mtrl.actors.shard_insert import ShardRoute, ShardWriter, array_bytes, obs_moments
from mtrl.actors.unroll import UnrollBuffer
from mtrl.algorithms.sac.obs_norm import ObsNorms, RunningObsNorm, combine_moments
from mtrl.config.replay import ReplayConfig
from mtrl.replay import TransitionStorage
from mtrl.replay.shard import ReplayShard
from mtrl.replay.shard_math import bytes_per_node, host_of, shard_hosts
from mtrl.train.shard_memory import shard_memory_problem

OBS = spaces.Box(-1e9, 1e9, (3,), np.float32)
ACT = spaces.Discrete(4)
T, N = 5, 4


def unroll(task: int, rng: np.random.Generator) -> UnrollBuffer:
    buf = UnrollBuffer.allocate(task, T, N, OBS, ACT)
    buf.obs[:] = rng.normal(3.0, 2.0, buf.obs.shape)
    buf.valid[:] = True
    return buf


def test_shards_go_to_the_nodes_with_cpus_that_offer_what_they_ask() -> None:
    nodes = {
        "head": {"CPU": 0.0, "memory": 1e9},
        "b": {"CPU": 4.0, "sim": 1.0},
        "a": {"CPU": 4.0},
        "c": {"CPU": 0.5, "sim": 1.0},
    }
    assert shard_hosts(nodes, 0.0, {}) == ["a", "b", "c"]  # never the CPU-less head
    assert shard_hosts(nodes, 1.0, {}) == ["a", "b"]
    assert shard_hosts(nodes, 0.0, {"sim": 1.0}) == ["b", "c"]
    hosts = ["a", "b"]
    assert [host_of(i, hosts) for i in range(5)] == ["a", "b", "a", "b", "a"]
    assert host_of(0, []) is None


def test_bytes_per_node_split_every_task_over_its_shards() -> None:
    # two tasks of 1000 and 3000 bytes over 4 shards on 2 hosts: each host holds 2 shards
    assert bytes_per_node([1000, 3000], 4, ["a", "b"]) == {"a": 2000, "b": 2000}
    assert bytes_per_node([1001], 2, ["a", "b", "c"]) == {"a": 501, "b": 501, "c": 0}
    assert bytes_per_node([1000], 2, []) == {}


def test_a_node_whose_shards_do_not_fit_is_refused_in_one_line() -> None:
    per_node = {"a" * 20: 6_000_000_000, "b" * 20: 9_000_000_000, "c" * 20: 1}
    room = {"a" * 20: 4_000_000_000, "b" * 20: 8_000_000_000, "c" * 20: None}
    line = shard_memory_problem(per_node, room, 1_000_000, 2)
    assert line is not None and "\n" not in line
    assert "node aaaaaaaaaaaa (and 1 other nodes)" in line  # the most over, then the count
    assert "6 GB" in line and "4 GB" in line and "replay.capacity" in line
    assert shard_memory_problem({"a": 10}, {"a": 10}, 1, 1) is None


def test_a_shards_answers_are_numbered_and_its_inserts_counted_per_sender() -> None:
    shard = ReplayShard(ReplayConfig(shards={"count": 2}))
    template = TransitionStorage(0, OBS, ACT, T, 4 * T * N).empty_like(1)
    first = shard.open(0, template, 4, peers=2)
    rng = np.random.default_rng(0)
    a = shard.add(unroll(0, rng), "node-a")
    b = shard.add(unroll(0, rng))
    assert first.seq < a.seq < b.seq and a.instance == b.instance == shard.instance
    assert (a.inserted, b.inserted) == (T * N, 2 * T * N)  # cumulative: whoever inserted
    assert shard.sources() == {0: {"node-a": 1, "learner": 1}}
    assert ReplayShard(ReplayConfig(shards={"count": 2})).instance != shard.instance


def test_a_shard_holds_its_share_of_the_ratio_for_waiting_actors() -> None:
    limit = {"samples_per_insert": 1.0, "min_size_to_sample": 40, "error_buffer": 40.0}
    shard = ReplayShard(
        ReplayConfig(shards={"count": 2, "rate_limit": {**limit, "waits": "actors"}})
    )
    template = TransitionStorage(0, OBS, ACT, T, 8 * T * N).empty_like(1)
    shard.open(0, template, 8, peers=2)
    rng = np.random.default_rng(1)
    # its share: min size 20, buffer 20; after 20 items only 20 more go in before draws
    assert shard.admits(0, 20)
    shard.add(unroll(0, rng), "n")
    assert shard.admits(0, 20)
    shard.add(unroll(0, rng), "n")
    assert not shard.admits(0, 20), "ahead of its share of the ratio"
    shard.sample(0, 20, seed=0)
    assert shard.admits(0, 20), "the draws made room"
    learner_waits = ReplayShard(ReplayConfig(shards={"count": 2, "rate_limit": limit}))
    learner_waits.open(0, template, 8)
    for _ in range(4):
        learner_waits.add(unroll(0, rng))
    assert learner_waits.admits(0, 20), "actors never wait with waits: learner"


def test_an_actors_moments_merged_are_the_learners_own_statistics() -> None:
    rng = np.random.default_rng(2)
    bufs = [unroll(0, rng) for _ in range(3)]
    whole, parts = ObsNorms([RunningObsNorm(3)]), ObsNorms([RunningObsNorm(3)])
    for buf in bufs:
        whole.observe(0, buf.obs)
        moments = obs_moments(buf.obs)
        assert moments is not None and moments[0] == T * N
        parts.observe_moments(0, moments)
    a, b = whole.norms[0], parts.norms[0]
    assert a is not None and b is not None
    assert float(a.count) == float(b.count) == 3 * T * N
    np.testing.assert_allclose(a.mean.numpy(), b.mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(a.var.numpy(), b.var.numpy(), rtol=1e-12)
    empty = (0.0, np.zeros(3), np.ones(3))
    assert combine_moments((5.0, np.ones(3), np.ones(3)), empty)[0] == 5.0
    assert obs_moments(np.zeros((T + 1, N, 3), np.uint8)) is None  # ints: not normalised
    assert obs_moments({"x": np.zeros((T + 1, N, 3), np.float32)}) is None


def test_an_actor_writes_only_to_its_own_nodes_shards_and_counts_the_data_it_would_send() -> None:
    route = ShardRoute({"a": [(0, "h0"), (2, "h2")], "b": [(1, "h1")]}, wait_s=None, version=3)
    assert ShardWriter(route, "a").mine == [(0, "h0"), (2, "h2")]
    assert ShardWriter(route, "c").mine == [], "no shard here: the unroll travels"
    buf = unroll(0, np.random.default_rng(3))
    arrays = {"obs": buf.obs, "actions": buf.actions, "core_state": None, "d": {"x": buf.valid}}
    assert array_bytes(arrays) == buf.obs.nbytes + buf.actions.nbytes + buf.valid.nbytes


def test_the_preflight_refuses_shards_a_node_cannot_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """SAC's replay estimate (its registration's) over the shards' hosts, against each node's
    Ray memory: the cluster's answer is the one thing stood in for (no Ray here)."""
    from mtrl.config import parse_config
    from mtrl.errors import UserError
    from mtrl.plugins import get_plugins
    from mtrl.train import shard_memory

    cfg = parse_config(
        """
tasks:
  - {env: gymnasium/CartPole-v1, name: a}
  - {env: gymnasium/CartPole-v1, name: b}
actors: {mode: ray}
replay: {capacity: 1000000, shards: {count: 2}}
learner: {algorithm: sac}
"""
    )
    specs = [get_plugins().env_spec(t.env) for t in cfg.tasks]
    nodes = {"head": {"memory": 1e12}, "w1": {"CPU": 2.0, "memory": 4e10}, "w2": {"CPU": 2.0}}
    monkeypatch.setattr(shard_memory, "live_nodes_by_id", lambda: nodes)
    monkeypatch.setattr(shard_memory, "this_node", lambda: "head")
    per_node = shard_memory.check_shard_memory(cfg, specs)
    assert set(per_node) == {"w1", "w2"} and per_node["w1"] == per_node["w2"] > 0
    nodes["w1"]["memory"] = per_node["w1"] - 1
    with pytest.raises(UserError) as err:
        shard_memory.check_shard_memory(cfg, specs)
    assert "\n" not in str(err.value) and "node w1" in str(err.value)
