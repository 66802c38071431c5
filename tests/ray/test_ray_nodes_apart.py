"""Sharded replay on Ray nodes that are really apart: a head and two worker nodes, each in its
own network namespace with its own address, joined by veth links limited to 100 Mbit/s by
``tc``, started with ``ray start`` as on a real cluster (:mod:`mtrl.testing.ray_nodes`).

``mtrl train`` of a SAC config with one shard per worker node runs as the driver on the head:
its Ray actors store every unroll in their own node's shard (no unroll reaches the learner)
until one worker node is killed outright mid-run; the run goes on, counting the lost shard and
its items, the lost actors started again on the node that is left, and finishes its budget.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed")

from mtrl.testing.ray_nodes import RayNodes
from mtrl.testing.slow_links import Link, SlowNetwork, unavailable

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(unavailable(delay=False) is not None, reason=f"{unavailable(False)}"),
    pytest.mark.timeout(1500),
]

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 900.0  # a cap on each wait, not a budget: beside CPU hogs the run is slow
STEPS = 16_000

CONFIG = """
name: apart
seed: 0
total_env_steps: {steps}
tasks:
  - {{env: gymnasium/Pendulum-v1, num_envs: 4}}
  - {{env: gymnasium/CartPole-v1, num_envs: 4}}
scheduler: {{num_actors: 2}}
actors: {{mode: ray}}
learner:
  algorithm: sac
  unroll_length: 16
  batch_size: 2
  model: {{encoder_dim: 32, torso: [32]}}
  sac: {{learning_starts: 500, batch_size: 64, replay_ratio: 16}}
replay:
  capacity: 20000
  shards: {{count: 2, layout: mixed}}
tracking: {{run_dir: {runs}, console: quiet, log_every_s: 0.5, wandb: {{mode: disabled}}}}
checkpoint: {{every_s: 3600}}
"""


def _last_metrics(runs: Path) -> dict[str, Any]:
    """The newest metrics row of the run under ``runs`` (empty before the first)."""
    files = list(runs.glob("*/metrics.jsonl"))
    if not files:
        return {}
    lines = files[0].read_text().splitlines()
    for line in reversed(lines):
        try:
            return json.loads(line)
        except json.JSONDecodeError:  # a row being written
            continue
    return {}


def test_sac_on_shards_across_namespaced_nodes_survives_a_lost_node(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    cfg = tmp_path / "apart.yaml"
    cfg.write_text(CONFIG.format(steps=STEPS, runs=runs))
    log = (tmp_path / "train.log").open("w")
    with (
        SlowNetwork(hosts=3, link=Link(rate_mbit=100), name=f"apart{id(cfg) % 10000}") as net,
        RayNodes(net, [2, 2]) as nodes,
    ):
        train = subprocess.Popen(
            nodes.driver([sys.executable, "-m", "mtrl.cli", "train", str(cfg)]),
            env=dict(nodes.env, WANDB_MODE="offline", PYTHONPATH=str(ROOT)),
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            # wait until both shards are fed by the actors and the learner trains on them
            deadline = time.monotonic() + DEADLINE_S
            before: dict[str, Any] = {}
            while time.monotonic() < deadline and train.poll() is None:
                before = _last_metrics(runs)
                if before.get("replay/actor_inserts", 0) >= 40 and before.get(
                    "sac/gradient_steps", 0
                ):
                    break
                time.sleep(0.5)
            assert train.poll() is None, (tmp_path / "train.log").read_text()[-4000:]
            assert before.get("replay/actor_inserts", 0) >= 40, before
            crossed = [net.tx_bytes(i) for i in range(3)]
            nodes.kill_node(2)
            code = train.wait(timeout=DEADLINE_S)
        finally:
            if train.poll() is None:
                train.kill()
    out = (tmp_path / "train.log").read_text()
    assert code == 0, out[-4000:]
    after = _last_metrics(runs)
    # before the loss: every unroll stored at its actor's node, none sent to the learner
    assert before["replay/learner_inserts"] == 0 and before["actors/unroll_bytes"] == 0
    assert before["replay/shards"] == 2 and before["actors/nodes"] == 2
    assert all(b > 0 for b in crossed), "every node's traffic crossed its link"
    # the loss: counted, its items reported, the actors back on the node that is left
    assert after["replay/lost_shards"] >= 1, after
    assert after["replay/lost_items"] > 0, after
    lost = sum(v for k, v in after.items() if k.endswith("/faults/lost"))
    assert lost >= 1, "the killed node's actors were counted as lost"
    assert after["actors/nodes"] == 1
    assert after["charts/env_steps"] >= STEPS
    assert after["replay/actor_inserts"] > before["replay/actor_inserts"]


PROBE = """
import json, sys, time
import ray
from mtrl.actors.ray_cluster import node_answers
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
worker = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and "node1" in n["Resources"])
print(json.dumps({"answers": node_answers(worker)}), flush=True)
sys.stdin.readline()  # the node is killed meanwhile
t0 = time.monotonic()
answers = node_answers(worker)
alive = any(n["NodeID"] == worker and n["Alive"] for n in ray.nodes())
print(json.dumps({"answers": answers, "listed_alive": alive, "s": time.monotonic() - t0}))
"""


def test_a_killed_node_stops_answering_at_once(tmp_path: Path) -> None:
    """The probe the Ray pool makes of an overdue unroll's node (a lost node, not a hung env
    step): a node killed outright no longer answers, whether or not the cluster has marked it
    dead yet; a live one answers."""
    with (
        SlowNetwork(hosts=2, link=Link(rate_mbit=100), name=f"probe{id(tmp_path) % 10000}") as net,
        RayNodes(net, [1]) as nodes,
    ):
        probe = subprocess.Popen(
            nodes.driver([sys.executable, "-c", PROBE, nodes.address]),
            env=dict(nodes.env, PYTHONPATH=str(ROOT)),
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(tmp_path / "probe.log").open("w"),
            text=True,
        )

        def answer() -> dict[str, Any]:
            # Ray prints to the driver's stdout too (a killed node's raylet is reported
            # there): the probe's answers are its lines that open a JSON object.
            assert probe.stdout is not None
            while True:
                line = probe.stdout.readline()
                assert line, (tmp_path / "probe.log").read_text()[-3000:]
                if line.startswith("{"):
                    return json.loads(line)

        try:
            assert probe.stdin is not None
            before = answer()
            nodes.kill_node(1)
            probe.stdin.write("\n")
            probe.stdin.flush()
            after = answer()
        finally:
            probe.kill()
    assert before == {"answers": True}
    assert after["answers"] is False, after
    assert after["s"] < 10.0, after  # a refused connection, not the cluster's health checks
