"""Ray scenarios, each run in its own process by :func:`ray_netns.run_scenario`.

``python scenarios.py NAME '{"kwarg": ...}'`` runs ``NAME(**kwargs)`` and prints ``RESULT``
and the JSON of what it returns; the test asserts on that. Everything is real: Ray's embedded
runtime or a ``ray.cluster_utils.Cluster`` of simulated nodes, real envs, the real trainer.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

#: Nodes are declared dead after ~1 s of missed health checks (default ~30 s).
FAST_FAILURE = {"health_check_period_ms": 200, "health_check_failure_threshold": 5}

QUIET = """
checkpoint: {enabled: false}
tracking: {console: quiet, log_every_s: 1.0, csv: false, wandb: {mode: disabled}}
"""


#: Two CartPole tasks, the second pinned by a custom resource to the nodes that offer ``sim_b``.
ANYWHERE_AND_PINNED = """tasks:
  - {env: gymnasium/CartPole-v1, name: anywhere, num_envs: 8, target_score: 150}
  - env: gymnasium/CartPole-v1
    name: pinned
    num_envs: 8
    target_score: 150
    placement: {num_cpus: 1, resources: {sim_b: 1}}"""


def _cluster(workers: list[dict[str, Any]]) -> tuple[Any, list[Any]]:
    """A head node with no CPUs (nothing but the driver's bookkeeping runs there) and
    ``workers`` (``add_node`` kwargs): the cluster and the worker nodes; this process is
    connected to it."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "_system_config": FAST_FAILURE},
    )
    _CLUSTERS.append(cluster)
    nodes = [cluster.add_node(**w) for w in workers]
    ray.init(address=cluster.address, namespace="mtrl-test")
    cluster.wait_for_nodes()
    return cluster, nodes


#: How long a scenario's run may take to reach what it waits for: generous, for a machine
#: shared with other work (under a load of 14 on 2 cores a 4-unroll scenario took 290 s).
DEADLINE_S = 600.0


def stopping_when(done: Callable[[Any], bool], base: type | None = None) -> Any:
    """A :class:`~mtrl.train.trainer.Trainer` (or ``base``) subclass whose run stops once
    ``done(trainer)`` holds — checked at every actor unroll — or after :data:`DEADLINE_S`
    (then the test's assertions say what was missing). The config's ``total_env_steps`` is
    only a cap: runs wait on what they check (first unrolls, nodes assigned, restarts), never
    on a step budget that start-up on a busy machine can use up."""
    from mtrl.train.trainer import Trainer

    class Until(base or Trainer):  # type: ignore[misc, valid-type]
        def run(self) -> Any:
            self.until_end = time.monotonic() + DEADLINE_S
            return super().run()

        def on_unroll(self, task: int, info: Any) -> None:
            super().on_unroll(task, info)
            if time.monotonic() > self.until_end or done(self):
                self.request_stop()

    return Until


def _placed(pool: Any) -> int:
    """Actors of ``pool`` that have started on a node."""
    return sum(pool.actors_per_node().values())


def _flat(obs: Any) -> list[np.ndarray]:
    if isinstance(obs, dict):
        return [a for k in sorted(obs) for a in _flat(obs[k])]
    return [np.array(obs)]


def _unroll_arrays(buf: Any) -> list[np.ndarray]:
    fields = ("actions", "behaviour_logp", "rewards", "terminated", "truncated", "valid")
    state = [] if buf.core_state is None else [np.array(buf.core_state)]
    return _flat(buf.obs) + [np.array(getattr(buf, f)) for f in fields] + state


def unrolls_match_serial(unrolls: int = 4, core: str = "none") -> dict[str, Any]:
    """The first ``unrolls`` unrolls of each task from one Ray actor and from the serial pool,
    greedy policy, same seeds: compared array by array, bit for bit (with a recurrent
    ``core``, the unrolls' initial core states too)."""
    import ray

    from mtrl.actors.inference import InferenceModel
    from mtrl.actors.ray_pool import RayPool
    from mtrl.actors.serial_pool import SerialPool
    from mtrl.config import parse_config
    from mtrl.learner.model import MultiTaskModel, TaskSpaces
    from mtrl.plugins import get_plugins
    from mtrl.train.task_envs import build_tasks

    torch.set_num_threads(1)  # as in the actor: the same kernels, the same sums
    ray.init(address="local", num_cpus=3, include_dashboard=False)
    cfg = parse_config(
        """
seed: 3
tasks:
  - {env: gymnasium/CartPole-v1, num_envs: 4}
  - {env: minatar/breakout, num_envs: 3}
  - {env: gymnasium/InvertedPendulum-v5, num_envs: 2}
learner: {unroll_length: 16, model: {encoder_dim: 32, torso: [32], core: CORE}}
actors: {mode: serial}
""".replace("CORE", core)
    )
    plugins = get_plugins()
    specs = [plugins.envs.get(t.env) for t in cfg.tasks]
    setups, envs = build_tasks(cfg, specs, 0, torch.device("cpu"))
    torch.manual_seed(0)
    model = MultiTaskModel(
        [TaskSpaces(s.observation_space, s.action_space) for s in setups], cfg.learner.model
    )
    T = cfg.learner.unroll_length
    serial = SerialPool(setups, envs, T, InferenceModel(model, shared=True, greedy=True))
    remote = RayPool(setups, T, InferenceModel(model, greedy=True), num_slots=2)
    remote.set_actors([1] * len(setups))

    def collect(pool: Any) -> dict[int, list[list[np.ndarray]]]:
        got: dict[int, list[list[np.ndarray]]] = {i: [] for i in range(len(setups))}
        while min(len(v) for v in got.values()) < unrolls:
            for ru in pool.get(timeout=5.0):
                if len(got[ru.task]) < unrolls:
                    got[ru.task].append(_unroll_arrays(ru.buffer))
                pool.release(ru)
        return got

    a, b = collect(serial), collect(remote)
    mismatches = [
        f"task {t} unroll {u} array {k}"
        for t in a
        for u in range(unrolls)
        for k, (x, y) in enumerate(zip(a[t][u], b[t][u], strict=True))
        if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x, y)
    ]
    at = -1 if core == "none" else -2  # "valid", before the core state when there is one
    episodes = sum(int((~np.concatenate([u[at] for u in a[t]])).sum()) for t in a)
    remote.close()
    serial.close()
    return {
        "mismatches": mismatches,
        "compared": sum(len(u) for v in a.values() for u in v),
        "resets": episodes,
    }


def trains_on_three_nodes(
    tmp: str, total_env_steps: int = 160_000, learned: float = 100.0
) -> dict[str, Any]:
    """A run on a head node without CPUs and two worker nodes, one of them offering a custom
    resource ``sim_b`` that pins the second task's actors to it; it runs on until it has
    ``total_env_steps``, its 4 actors have started on their nodes and each task's recent
    training return is ``learned`` or more. How many updates a step budget buys depends on the
    machine's load (the actors run ahead of a busy learner), so the run waits on the learning
    it checks; ``total_env_steps * 10`` and :data:`DEADLINE_S` are only caps."""
    from mtrl.config import parse_config

    cluster, (_, node_b) = _cluster([{"num_cpus": 2}, {"num_cpus": 3, "resources": {"sim_b": 2}}])
    cfg = parse_config(
        f"""
name: three-nodes
seed: 1
total_env_steps: {total_env_steps * 10}
{ANYWHERE_AND_PINNED}
actors: {{mode: ray, slots_per_actor: 2}}
scheduler: {{num_actors: 4}}
learner: {{unroll_length: 16, batch_size: 16}}
tracking: {{run_dir: {tmp}/runs, console: quiet, log_every_s: 1.0, wandb: {{mode: disabled}}}}
checkpoint: {{enabled: false}}
"""
    )
    until = stopping_when(
        lambda t: (
            t.env_steps >= total_env_steps
            and _placed(t.pool) == 4
            and all(len(p.returns) and np.mean(p.returns) >= learned for p in t.progress)
        )
    )
    trainer = until(cfg, console=False)
    placed: dict[str, list[str]] = {"anywhere": [], "pinned": []}
    try:
        result = trainer.run()
        names = ["anywhere", "pinned"]
        for a in trainer.pool._actors.values():
            placed[names[a.spec.task]].append(a.node)
        faults = [f.faults for f in trainer.pool.faults]
        metrics = json.loads((trainer.run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    finally:
        trainer.close()
    return {
        "head": cluster.head_node.node_id,
        "sim_b": node_b.node_id,
        "placed": placed,
        "env_steps": result.env_steps,
        "tasks": {t.name: {"final": t.mean_return, "greedy": t.greedy_eval} for t in result.tasks},
        "node_metrics": {k: v for k, v in metrics.items() if k.startswith("actors/")},
        "faults": faults,
    }


def _wait_until_placed(pool: Any, timeout_s: float = DEADLINE_S) -> None:
    """Serve the pool until every actor it runs has started on a node (or ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _placed(pool) >= sum(pool.actors_per_task()):
            return
        for ru in pool.get(timeout=0.5):
            pool.release(ru)


def survives_node_loss(total_env_steps: int = 60_000) -> dict[str, Any]:
    """Two worker nodes; once the run is going, the node with the most actors is removed. The
    run must finish, count the lost actors as faults and start them again on the other node
    (it runs on until the replacements have been started)."""
    from mtrl.config import parse_config
    from mtrl.train.trainer import Trainer

    cluster, workers = _cluster([{"num_cpus": 2}, {"num_cpus": 2}])
    cfg = parse_config(
        f"""
name: node-loss
total_env_steps: {total_env_steps * 10}
tasks:
  - {{env: gymnasium/CartPole-v1, num_envs: 8}}
actors: {{mode: ray}}
scheduler: {{num_actors: 2}}
learner: {{unroll_length: 16, batch_size: 16, model: {{encoder_dim: 16, torso: [16]}}}}
"""
        + QUIET
    )
    removed: dict[str, Any] = {}

    class Watched(Trainer):
        def on_unroll(self, task: int, info: Any) -> None:
            if removed or self.env_steps < total_env_steps // 4:
                return
            per_node = self.pool.actors_per_node()
            victim = max(per_node, key=per_node.get)
            node = next(n for n in workers if n.node_id == victim)
            removed.update(node=victim, actors=per_node[victim], at=self.env_steps)
            cluster.remove_node(node, allow_graceful=False)

    def done(t: Any) -> bool:
        restarted = bool(removed) and t.pool.faults[0].restarts >= removed["actors"]
        return restarted and t.env_steps >= total_env_steps

    trainer = stopping_when(done, Watched)(cfg, write_run_dir=False, console=False)
    try:
        result = trainer.run()
        pool = trainer.pool
        _wait_until_placed(pool)  # a replacement may still be starting
        f = pool.faults[0]
        after = pool.actors_per_node()
        counts = trainer.pool.actors_per_task()
    finally:
        trainer.close()
    return {
        "removed": removed,
        "env_steps": result.env_steps,
        "faults": f.faults,
        "by_kind": f.by_kind,
        "restarts": f.restarts,
        "last_error": f.last_error,
        "greedy_eval": result.tasks[0].greedy_eval,
        "actors_after": after,
        "actors_per_task": counts,
    }


def _fault_records(pool: Any) -> list[dict[str, Any]]:
    """Each task's fault record as JSON."""
    return [
        {
            "faults": f.faults,
            "by_kind": f.by_kind,
            "restarts": f.restarts,
            "quarantined": f.quarantined,
            "reason": f.reason,
            "last_error": f.last_error,
        }
        for f in pool.faults
    ]


def faults_are_counted(tmp: str) -> dict[str, Any]:
    """The fault run of tests/training/test_fault_run.py, with Ray actors."""
    import ray

    from mtrl.config import parse_config

    ray.init(address="local", num_cpus=6, include_dashboard=False)
    total = 20_000

    def chaos(name: str, kwargs: str) -> str:
        return (
            f"\n  - {{env: chaos/wrap, name: {name}, num_envs: 4, "
            f"env_kwargs: {{step_delay_s: 0.004, {kwargs}}}}}"
        )

    once = f"faulty_instances: 1, marker_dir: {tmp}/markers"
    # The step cap is far away: on a busy machine the healthy task can make 200k steps before
    # the replacements have delivered. The run waits on what the test checks (done). The step
    # timeout is far above a healthy step even on a starved machine (a step of 4 CartPoles
    # stalled past 2 s there would be counted a hang): only the hanging env reaches it.
    cfg = parse_config(
        f"""
total_env_steps: {total * 1000}
scheduler: {{num_actors: 6, max_restarts: 1, step_timeout_s: 10.0}}
actors: {{mode: ray}}
learner: {{unroll_length: 8, batch_size: 8, model: {{encoder_dim: 16, torso: [16]}}}}
tasks:"""
        + chaos("healthy", "env: gymnasium/CartPole-v1")
        + chaos("raises", f"raise_after: 11, {once}/raise")
        + chaos("nan", f"nan_after: 3, {once}/nan")
        + chaos("killed", f"kill_after: 11, {once}/kill")
        + chaos("hangs", f"hang_after: 3, {once}/hang")
        + chaos("broken", "raise_after: 0")
        + QUIET
    )

    def done(t: Any) -> bool:  # what the test checks: each replacement delivered
        f, steps = t.pool.faults, [p.env_steps for p in t.progress]
        replaced = all(f[i].restarts >= 1 and steps[i] > 32 * 11 for i in (1, 2, 3, 4))
        return replaced and f[5].quarantined and steps[0] > 2000 and t.env_steps >= total

    trainer = stopping_when(done)(cfg, write_run_dir=False, console=False)
    try:
        result = trainer.run()
        faults = _fault_records(trainer.pool)
    finally:
        trainer.close()
    return {
        "env_steps": result.env_steps,
        "faults": faults,
        "task_steps": {t.name: t.env_steps for t in result.tasks},
    }


def torchrun_replicas_share_one_cluster(tmp: str) -> dict[str, Any]:
    """``mtrl train CFG --nproc 2`` (torchrun, two gloo replicas) with ``RAY_ADDRESS`` set:
    each replica drives its own Ray actors on the one cluster. The CPUs the cluster hands out
    are sampled while it runs."""
    import os
    import subprocess

    import ray

    cluster, _ = _cluster([{"num_cpus": 6}])
    cfg = Path(tmp) / "dp_ray.yaml"
    cfg.write_text(
        f"""
name: dp-ray
total_env_steps: 24000
tasks:
  - {{env: gymnasium/CartPole-v1, num_envs: 8}}
  - {{env: gymnasium/Pendulum-v1, num_envs: 8}}
actors: {{mode: ray}}
scheduler: {{num_actors: 2}}
learner: {{batch_size: 16, model: {{encoder_dim: 32, torso: [32]}}}}
tracking: {{run_dir: {tmp}/runs, log_every_s: 1, console: plain, wandb: {{mode: disabled}}}}
"""
    )
    env = dict(os.environ, RAY_ADDRESS=cluster.address, GLOO_SOCKET_IFNAME="lo")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mtrl.cli", "train", str(cfg), "--nproc", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    used = 0.0
    while proc.poll() is None:
        free = ray.available_resources().get("CPU", 0.0)
        used = max(used, 6.0 - free)
        time.sleep(0.2)
    out = proc.stdout.read() if proc.stdout else ""
    (run_dir,) = (Path(tmp) / "runs").iterdir()
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    return {
        "returncode": proc.returncode,
        "tail": out[-3000:],
        "cpus_used_max": used,
        "env_steps": last["charts/env_steps"],
    }


def resumes_beside_an_anakin_task(tmp: str) -> dict[str, Any]:
    """A Ray-actor task beside an Anakin task (tensor env on the learner's device): train,
    checkpoint, stop; resume and train on. The Anakin task steps from the first update on,
    while the Ray actor still starts: each part runs until it has its 40k steps *and* the Ray
    task has delivered in it (however long its actor takes to start on a busy machine)."""
    import ray

    from mtrl.config import parse_config

    ray.init(address="local", num_cpus=2, include_dashboard=False)
    cfg = parse_config(
        f"""
name: ray-anakin
total_env_steps: 4000000
tasks:
  - {{env: gymnasium/CartPole-v1, name: remote, num_envs: 16}}
  - {{env: tensor/CartPole-v1, name: on-device, num_envs: 2, anakin: true}}
actors: {{mode: ray}}
scheduler: {{num_actors: 1}}
learner: {{unroll_length: 16, batch_size: 16, model: {{encoder_dim: 16, torso: [16]}}}}
tracking: {{run_dir: {tmp}/runs, console: quiet, log_every_s: 1.0, csv: false,
            wandb: {{mode: disabled}}}}
"""
    )

    def remote_past(steps: int, remote_steps: int) -> Callable[[Any], bool]:
        return lambda t: t.env_steps >= steps and t.progress[0].env_steps > remote_steps

    first = stopping_when(remote_past(40_000, 0))(cfg, console=False)
    try:
        r1 = first.run()
        run_dir = first.run_dir
    finally:
        first.close()
    done = remote_past(r1.env_steps + 40_000, r1.tasks[0].env_steps)
    second = stopping_when(done).resume(run_dir, console=False)
    try:
        start = {t.name: t.env_steps for t in second.results()}
        r2 = second.run()
        per_node = second.pool.actors_per_node()
    finally:
        second.close()
    return {
        "first": {t.name: t.env_steps for t in r1.tasks},
        "resumed_at": start,
        "second": {t.name: t.env_steps for t in r2.tasks},
        "env_steps": [r1.env_steps, r2.env_steps],
        "actors_per_node": per_node,
        "checkpoints": sorted(p.name for p in (run_dir / "checkpoints").iterdir()),
    }


def budget_follows_the_nodes(total_env_steps: int = 60_000) -> dict[str, Any]:
    """``budget_from_cluster``: one worker node of 2 CPUs, then a second joins mid-run; the
    scheduler's budget (and the actors started) must grow with it."""
    from mtrl.config import parse_config
    from mtrl.train.trainer import Trainer

    cluster, _ = _cluster([{"num_cpus": 2}])
    cfg = parse_config(
        f"""
name: budget
total_env_steps: {total_env_steps * 10}
tasks:
  - {{env: gymnasium/CartPole-v1, num_envs: 8}}
actors: {{mode: ray, ray: {{budget_from_cluster: true, reserve_cpus: 0}}}}
scheduler: {{num_actors: 1, rebalance_every_s: 1, warmup_s: 0}}
learner: {{unroll_length: 16, batch_size: 16, model: {{encoder_dim: 16, torso: [16]}}}}
"""
        + QUIET
    )
    seen: dict[str, Any] = {"before": None, "after": []}

    class Watched(Trainer):
        def on_unroll(self, task: int, info: Any) -> None:
            actors = self.pool.actors_per_task()[0]
            if seen["before"] is None and self.env_steps >= total_env_steps // 4:
                seen["before"] = {"actors": actors, "slots": self.rebalancer.budget.slots}
                cluster.add_node(num_cpus=2)
            elif seen["before"] is not None:
                seen["after"].append(actors)

    def done(t: Any) -> bool:  # the joined node's CPUs in the budget, its actors started
        grown = t.rebalancer.budget.slots == 4 and _placed(t.pool) == 4
        return grown and t.env_steps >= total_env_steps

    trainer = stopping_when(done, Watched)(cfg, write_run_dir=False, console=False)
    try:
        result = trainer.run()
        slots = trainer.rebalancer.budget.slots
        _wait_until_placed(trainer.pool)
        per_node = trainer.pool.actors_per_node()
    finally:
        trainer.close()
    return {
        "before": seen["before"],
        "max_actors_after": max(seen["after"], default=0),
        "slots_at_end": slots,
        "nodes_at_end": len(per_node),
        "env_steps": result.env_steps,
    }


def unplaceable_task_is_a_fault() -> dict[str, Any]:
    """A task whose placement names a resource only one node has, and that node leaves the
    cluster before the task's actor starts: after ``start_timeout_s`` the actor is a counted
    fault naming the resource, not a silent wait. (A placement no node has at the start is
    refused: tests/ray/test_ray_edges.py.)"""
    import ray

    from mtrl.actors.faults import FaultPolicy
    from mtrl.actors.inference import InferenceModel
    from mtrl.actors.ray_pool import RayPool
    from mtrl.config import parse_config
    from mtrl.config.placement import TaskPlacement
    from mtrl.learner.model import MultiTaskModel, TaskSpaces
    from mtrl.plugins import get_plugins
    from mtrl.train.task_envs import build_tasks

    cluster, (_, solver) = _cluster(
        [{"num_cpus": 2}, {"num_cpus": 1, "resources": {"solver_x": 1}}]
    )
    cfg = parse_config("tasks: [{env: gymnasium/CartPole-v1, num_envs: 2}]")
    specs = [get_plugins().envs.get(t.env) for t in cfg.tasks]
    setups, envs = build_tasks(cfg, specs, 0, torch.device("cpu"))
    for env in envs:
        if env is not None:
            env.close()
    model = MultiTaskModel(
        [TaskSpaces(s.observation_space, s.action_space) for s in setups], cfg.learner.model
    )
    pool = RayPool(
        setups,
        8,
        InferenceModel(model),
        placements=[TaskPlacement(resources={"solver_x": 1})],
        faults=FaultPolicy(start_timeout_s=2.0, max_restarts=0),
    )
    cluster.remove_node(solver, allow_graceful=False)
    deadline = time.monotonic() + DEADLINE_S
    while any(n["Alive"] and n["NodeID"] == solver.node_id for n in ray.nodes()):
        assert time.monotonic() < deadline, "the removed node is still alive"
        time.sleep(0.2)
    pool.set_actors([1])
    events: list[Any] = []
    while not events and time.monotonic() < deadline:
        pool.get(timeout=0.5)
        events = pool.events()
    f = pool.faults[0]
    pool.close()
    return {
        "events": [(e.kind, e.text) for e in events],
        "by_kind": f.by_kind,
        "quarantined": f.quarantined,
    }


def local_and_remote_actors(
    tmp: str, total_env_steps: int = 120_000, learned: float = 120.0
) -> dict[str, Any]:
    """``actors.ray.local_actors: 2`` on a head node without CPUs and one worker node with a
    custom resource ``sim_b``: the unpinned task's two actors run here as worker processes (with
    their own policy copies: ``actors.inference: auto`` and a CPU learner), the pinned task's on
    its node as Ray actors. It runs on until both Ray actors have started on their node, the
    pinned task has delivered 5000 steps and the local task's recent training return is
    ``learned`` or more (on a busy machine a step budget buys fewer updates)."""
    from mtrl.config import parse_config

    cluster, (node_b,) = _cluster([{"num_cpus": 3, "resources": {"sim_b": 2}}])
    # The step cap is far away: on a busy machine the fast local actors can reach ten times
    # the budget before the pinned Ray actors have started; the run waits on done.
    cfg = parse_config(
        f"""
name: hybrid
seed: 1
total_env_steps: {total_env_steps * 1000}
{ANYWHERE_AND_PINNED}
actors: {{mode: ray, ray: {{local_actors: 2}}}}
scheduler: {{num_actors: 4}}
learner: {{unroll_length: 16, batch_size: 16}}
tracking: {{run_dir: {tmp}/runs, console: quiet, log_every_s: 1.0, wandb: {{mode: disabled}}}}
checkpoint: {{enabled: false}}
"""
    )

    remote_nodes: list[str | None] = []

    def done(t: Any) -> bool:
        pinned = t.progress[1].env_steps >= 5_000 and _placed(t.pool.remote) == 2
        local = t.progress[0].returns
        if pinned and t.env_steps >= total_env_steps and np.mean(local or [0]) >= learned:
            # Where the Ray actors ran, as the run stops: on a busy machine the rebalancer may
            # still replace one in the last round, and a new actor has no node yet.
            remote_nodes[:] = [a.node for a in t.pool.remote._actors.values()]
            return True
        return False

    trainer = stopping_when(done)(cfg, console=False)
    try:
        result = trainer.run()
        pool = trainer.pool
        metrics = json.loads((trainer.run_dir / "metrics.jsonl").read_text().splitlines()[-1])
        out = {
            "kind": type(pool).__name__,
            "local": pool.local_per_task(),
            "remote": pool.remote.actors_per_task(),
            "remote_nodes": remote_nodes,
            "reached": bool(remote_nodes),  # done held (else the run hit DEADLINE_S)
            "steps": {t.name: t.env_steps for t in result.tasks},
            "tasks": {
                t.name: {"final": t.mean_return, "greedy": t.greedy_eval} for t in result.tasks
            },
            "node_metrics": {k: v for k, v in metrics.items() if k.startswith("actors/")},
            "faults": [f.faults for f in pool.faults],
            "local_inference": pool.local.shared_weights is not None,
            "server_forwards": pool.local.server.forwards,
        }
    finally:
        trainer.close()
    return {"head": cluster.head_node.node_id, "sim_b": node_b.node_id, **out}


def local_and_remote_faults(tmp: str) -> dict[str, Any]:
    """Faults with actors on both sides, one fault book: a task that always raises, with one
    local and one Ray actor, is quarantined once and loses its actors on both sides; a local
    worker process killed by its env is counted once and restarted (here: the quarantined
    task's room)."""
    import ray

    from mtrl.actors.hybrid_pool import HybridPool
    from mtrl.config import parse_config

    ray.init(address="local", num_cpus=4, include_dashboard=False)
    once = f"faulty_instances: 1, marker_dir: {tmp}/markers"
    total = 30_000
    # The step cap is far away: the local actors step fast, and on a busy machine the healthy
    # task's Ray actors have started after the local ones made 300k steps. The run waits on
    # what the test checks (done), DEADLINE_S at most.
    cfg = parse_config(
        f"""
total_env_steps: {total * 1000}
scheduler: {{num_actors: 6, max_restarts: 1, step_timeout_s: 5.0}}
actors: {{mode: ray, ray: {{local_actors: 3}}}}
learner: {{unroll_length: 8, batch_size: 8, model: {{encoder_dim: 16, torso: [16]}}}}
tasks:
  - {{env: chaos/wrap, name: killed, num_envs: 4,
      env_kwargs: {{env: gymnasium/CartPole-v1, step_delay_s: 0.002, kill_after: 11, {once}/kill}}}}
  - {{env: chaos/wrap, name: broken, num_envs: 4, env_kwargs: {{raise_after: 0}}}}
  - {{env: chaos/wrap, name: healthy, num_envs: 4,
      env_kwargs: {{env: gymnasium/CartPole-v1, step_delay_s: 0.002}}}}
"""
        + QUIET
    )
    first: dict[str, Any] = {}
    set_actors = HybridPool.set_actors

    def recorded(pool: HybridPool, counts: list[int]) -> None:
        set_actors(pool, counts)
        if not first:  # the run's first allocation, before any actor could fail
            first.update(
                counts=list(counts),
                local=pool.local_per_task(),
                remote=pool.remote.actors_per_task(),
            )

    def done(t: Any) -> bool:  # what the test checks: killed restarted, broken quarantined
        f, steps = t.pool.faults, [p.env_steps for p in t.progress]
        settled = f[0].restarts >= 1 and f[1].quarantined and min(steps[0], steps[2]) > 2000
        return settled and t.env_steps >= total

    HybridPool.set_actors = recorded  # type: ignore[method-assign]
    trainer = stopping_when(done)(cfg, write_run_dir=False, console=False)
    try:
        result = trainer.run()
        pool = trainer.pool
        faults = _fault_records(pool)
        end = {"local": pool.local_per_task(), "remote": pool.remote.actors_per_task()}
    finally:
        trainer.close()
    return {
        "first": first,
        "end": end,
        "faults": faults,
        "task_steps": {t.name: t.env_steps for t in result.tasks},
        "env_steps": result.env_steps,
    }


def _teardown() -> None:
    """Disconnect and stop every Ray process this scenario started (simulated nodes too)."""
    import ray

    ray.shutdown()
    for cluster in _CLUSTERS:
        cluster.shutdown()


_CLUSTERS: list[Any] = []


def main(scenarios: dict[str, Any]) -> None:
    """Run ``scenarios[argv[1]](**json(argv[2]))``, tear Ray down, print its ``RESULT``."""
    name, kwargs = sys.argv[1], json.loads(sys.argv[2] if len(sys.argv) > 2 else "{}")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    try:
        result = scenarios[name](**kwargs)
    finally:
        _teardown()
    print("RESULT " + json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    main(globals())
